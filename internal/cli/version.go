package cli

import (
	"context"
	"fmt"
	"runtime"

	"github.com/agentkernel/agentkernel/internal/version"
)

func runVersion(_ context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("version", "version")
	if err := parse(fs, args); err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "agentkernel %s (%s, %s/%s)\n", version.String(), runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return nil
}
