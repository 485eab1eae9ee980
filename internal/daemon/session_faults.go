//go:build !failpoints

package daemon

import "log/slog"

// sessionFailpoint is nil in production builds; crash tests build with
// -tags failpoints to hang a turn at a chosen point.
func sessionFailpoint(string, *slog.Logger) func(string) { return nil }
