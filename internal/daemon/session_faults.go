//go:build !failpoints

package daemon

import "log/slog"

// failpointHook is nil in production builds; crash tests build with
// -tags failpoints to hang a turn, or an alarm delivery, at a chosen point.
func failpointHook(string, *slog.Logger) func(string) { return nil }
