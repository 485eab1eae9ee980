package tools

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
)

// Sandboxes is the part of the sandbox manager tools run through: a guest
// call with lazy wake-up (sandbox.Manager.Client).
type Sandboxes interface {
	Client(ctx context.Context, tenantID, id string, fn func(c *guest.Client) error) error
}

// Limits bound one tool call.
type Limits struct {
	Timeout        time.Duration
	MaxOutputBytes int
}

// Run executes a built-in tool in the sandbox. A tool's own failure is a
// result with IsError; err is for a call that could not be made.
// Cancelling ctx stops the call (bash's process group is killed).
func Run(ctx context.Context, sb Sandboxes, tenantID, sandboxID, name string, input json.RawMessage, lim Limits) (*guest.ToolResult, error) {
	var res *guest.ToolResult
	err := sb.Client(ctx, tenantID, sandboxID, func(c *guest.Client) error {
		var err error
		res, err = c.RunTool(ctx, name, guest.ToolRequest{
			Input: input, TimeoutMS: lim.Timeout.Milliseconds(), MaxOutputBytes: lim.MaxOutputBytes,
		})
		return err
	})
	return res, err
}
