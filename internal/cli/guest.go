package cli

import (
	"context"

	"github.com/agentkernel/agentkernel/internal/guest"
)

// runGuest is `agentkernel guest`: the sandbox's PID 1. The daemon injects
// this same binary into every sandbox.
func runGuest(ctx context.Context, _ *Main, args []string) error {
	if code := guest.Main(ctx, args); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}
