package guest

import (
	"context"
	"net/http"
	"net/url"
)

// RunTool runs one agent_toolset_20260401 tool (bash, read, write, edit,
// glob, grep) in the sandbox. Cancelling ctx stops the call; for bash that
// kills the shell's process group.
func (c *Client) RunTool(ctx context.Context, name string, req ToolRequest) (*ToolResult, error) {
	var res ToolResult
	if err := c.call(ctx, http.MethodPost, "/tools/"+url.PathEscape(name), nil, req, &res); err != nil {
		return nil, err
	}
	return &res, nil
}

// CancelTool stops a running journalled tool call (an interrupted turn);
// the call still records its result under its op id. A call that is not
// running is a *Error with Code not_found.
func (c *Client) CancelTool(ctx context.Context, opID string) error {
	return c.call(ctx, http.MethodDelete, "/tools/ops/"+url.PathEscape(opID), nil, nil, nil)
}
