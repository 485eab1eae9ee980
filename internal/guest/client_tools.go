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
