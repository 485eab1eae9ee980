package tools

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
)

// DefaultBackgroundCap bounds a run_in_background command (seed 003's
// background tasks) unless the daemon is configured otherwise
// ([sandbox] background_cap): the guest kills it after this long, and the
// sandbox layer stops keeping the sandbox awake for it.
const DefaultBackgroundCap = 30 * time.Minute

// bashInput is the part of bash's input that decides how it runs.
type bashInput struct {
	Command         string `json:"command"`
	RunInBackground bool   `json:"run_in_background"`
}

// Background returns the command of a bash call that asks to run in the
// background, or ok=false for any other call.
func Background(name string, input json.RawMessage) (command string, ok bool) {
	if name != "bash" {
		return "", false
	}
	var in bashInput
	if json.Unmarshal(input, &in) != nil || !in.RunInBackground || strings.TrimSpace(in.Command) == "" {
		return "", false
	}
	return in.Command, true
}

// markedShell prefixes the command with a no-op naming the op, so a
// recovered turn can find the process it may have started (its argv
// carries the mark) instead of starting it twice.
func markedShell(opID, command string) string { return ": " + opID + "; " + command }

// StartBackground starts a background command in the sandbox's guest,
// capped at limit (the guest kills it then), marked with opID.
func StartBackground(ctx context.Context, sb Sandboxes, tenantID, sandboxID, opID, command string, env map[string]string, limit time.Duration) (*guest.ProcessInfo, error) {
	var info *guest.ProcessInfo
	err := sb.Client(ctx, tenantID, sandboxID, func(c *guest.Client) error {
		var err error
		info, err = c.StartProcess(ctx, guest.ExecRequest{Shell: markedShell(opID, command), Env: env, TimeoutMS: limit.Milliseconds()})
		return err
	})
	return info, err
}

// FindBackground returns the guest's process marked with opID (nil when
// the guest has none).
func FindBackground(ctx context.Context, sb Sandboxes, tenantID, sandboxID, opID string) (*guest.ProcessInfo, error) {
	var found *guest.ProcessInfo
	err := sb.Client(ctx, tenantID, sandboxID, func(c *guest.Client) error {
		ps, err := c.ListProcesses(ctx)
		if err != nil {
			return err
		}
		for _, p := range ps {
			if slices.ContainsFunc(p.Argv, func(a string) bool { return strings.HasPrefix(a, ": "+opID+";") }) {
				found = &p
				return nil
			}
		}
		return nil
	})
	return found, err
}

// PollBackground returns a background process's status.
func PollBackground(ctx context.Context, sb Sandboxes, tenantID, sandboxID, processID string) (*guest.ProcessInfo, error) {
	var info *guest.ProcessInfo
	err := sb.Client(ctx, tenantID, sandboxID, func(c *guest.Client) error {
		var err error
		info, err = c.Process(ctx, processID)
		return err
	})
	return info, err
}

// KillBackground kills a background process's group.
func KillBackground(ctx context.Context, sb Sandboxes, tenantID, sandboxID, processID string) error {
	return sb.Client(ctx, tenantID, sandboxID, func(c *guest.Client) error {
		_, err := c.KillProcess(ctx, processID, 0)
		return err
	})
}
