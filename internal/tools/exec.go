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
// Cancelling ctx stops the call (bash's process group is killed) unless
// opID is set: a journalled call (seed 003) is recorded by the guest before
// it runs, runs to its end whatever happens to the caller, and its result
// stays readable through OpStatus; the guest refuses the same op id twice
// (guest.ErrOpExists).
func Run(ctx context.Context, sb Sandboxes, tenantID, sandboxID, name string, input json.RawMessage, lim Limits, opID string) (*guest.ToolResult, error) {
	return RunEnv(ctx, sb, tenantID, sandboxID, name, input, lim, opID, nil)
}

// RunEnv is Run with extra environment for the tool's processes (a
// session's credential placeholders; guest.ToolRequest.Env).
func RunEnv(ctx context.Context, sb Sandboxes, tenantID, sandboxID, name string, input json.RawMessage, lim Limits, opID string, env map[string]string) (*guest.ToolResult, error) {
	var res *guest.ToolResult
	err := sb.Client(ctx, tenantID, sandboxID, func(c *guest.Client) error {
		var err error
		res, err = c.RunTool(ctx, name, guest.ToolRequest{
			Input: input, TimeoutMS: lim.Timeout.Milliseconds(), MaxOutputBytes: lim.MaxOutputBytes, OpID: opID, Env: env,
		})
		return err
	})
	return res, err
}

// OpStatus asks the guest what became of a journalled call, waiting up to
// wait for one still running (reattaching to it).
func OpStatus(ctx context.Context, sb Sandboxes, tenantID, sandboxID, opID string, wait time.Duration) (*guest.OpStatus, error) {
	var st *guest.OpStatus
	err := sb.Client(ctx, tenantID, sandboxID, func(c *guest.Client) error {
		var err error
		st, err = c.WaitOp(ctx, opID, wait)
		return err
	})
	return st, err
}

// Cancel stops a running journalled call (an interrupted turn). A call
// that already ended is not an error.
func Cancel(ctx context.Context, sb Sandboxes, tenantID, sandboxID, opID string) error {
	err := sb.Client(ctx, tenantID, sandboxID, func(c *guest.Client) error { return c.CancelTool(ctx, opID) })
	if guest.IsNotFound(err) {
		return nil
	}
	return err
}
