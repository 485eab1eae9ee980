package guest

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestChildRlimitAS(t *testing.T) {
	c, _ := startGuest(t, func(cfg *Config) {
		cfg.ChildRlimitAS = 64 << 20
		cfg.SelfArgv = []string{os.Args[0]}
	})
	ctx := context.Background()
	out, _, res, err := c.ExecOutput(ctx, ExecRequest{Shell: "ulimit -v"})
	if err != nil || strings.TrimSpace(string(out)) != "65536" || res.ExitCode != 0 {
		t.Fatalf("ulimit -v = %q (%+v, %v), want 65536 KiB", out, res, err)
	}
	out, _, res, err = c.ExecOutput(ctx, ExecRequest{Shell: `x=$(head -c 200000000 /dev/zero | tr '\0' a); echo ${#x}`})
	if err != nil || res.ExitCode == 0 || strings.Contains(string(out), "200000000") {
		t.Fatalf("200 MB allocation under 64 MB: %q exit %+v, %v", out, res, err)
	}
	// Missing binaries are still 127: the lookup happens before the launcher.
	if _, _, res, err := c.ExecOutput(ctx, ExecRequest{Argv: []string{"no-such-binary-xyz"}}); err != nil || res.ExitCode != 127 {
		t.Fatalf("missing binary: %+v, %v", res, err)
	}
}
