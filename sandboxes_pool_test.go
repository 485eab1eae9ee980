package agentkernel_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// TestSandboxWakesFromTheWarmPool: with warm_pool = 2 a new sandbox, and
// a stopped one when it starts again, runs in a sandbox the daemon started
// ahead (its hostname is the pool's name for it), with its workspace, and
// reaches out through the egress proxy as any sandbox does (its socket is
// made at assignment); with the default (warm_pool = 0) a sandbox starts as
// it always did.
func TestSandboxWakesFromTheWarmPool(t *testing.T) {
	ctx := context.Background()
	outside := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "outside") }))
	defer outside.Close()
	_, port, _ := net.SplitHostPort(outside.Listener.Addr().String())

	d := daemontest.Start(t, func(c *config.Config) { c.Sandbox.WarmPool = 2 })
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	metrics := func() string {
		t.Helper()
		resp, err := http.Get(d.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	// The default shape's pool fills at start, and refills after a wake,
	// in the background.
	waitFull := func() {
		t.Helper()
		for deadline := time.Now().Add(30 * time.Second); !strings.Contains(metrics(), "\nagentkernel_sandbox_pool_ready 2\n"); {
			if time.Now().After(deadline) {
				t.Fatalf("the warm pool did not fill:\n%s", grepLines(metrics(), "pool"))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFull()
	sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Sandboxes.Delete(ctx, sb.ID)
	run := func(cmd string) string {
		t.Helper()
		res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: cmd})
		if err != nil || res.ExitCode != 0 {
			t.Fatalf("%s: %+v %v", cmd, res, err)
		}
		return res.Stdout
	}
	first := strings.TrimSpace(run("hostname"))
	if !strings.HasPrefix(first, "wrm_") {
		t.Fatalf("a new sandbox runs in %q, not in a pooled sandbox", first)
	}
	run("echo kept > /workspace/kept.txt")
	if out := run("curl -sS -m 10 http://127.0.0.1:" + port + "/ || true"); !strings.Contains(out, "no network policy") {
		t.Fatalf("the pooled sandbox's way out is not the proxy: %q", out)
	}
	if _, err := c.Sandboxes.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	waitFull()
	if out := run("hostname; cat /workspace/kept.txt"); !strings.HasPrefix(out, "wrm_") || strings.HasPrefix(out, first) || !strings.HasSuffix(out, "\nkept\n") {
		t.Fatalf("after a stop and a wake: %q (first instance %s)", out, first)
	}
	if m := metrics(); !strings.Contains(m, `agentkernel_sandbox_pool_starts_total{driver="process",result="assigned"} 2`) {
		t.Fatalf("metrics do not count 2 assignments:\n%s", grepLines(m, "pool"))
	}

	off := daemontest.Start(t)
	co := agentkernel.New(agentkernel.WithBaseURL(off.URL), agentkernel.WithAPIKey(off.AdminKey))
	sb2, err := co.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	defer co.Sandboxes.Delete(ctx, sb2.ID)
	res, err := co.Sandboxes.Exec(ctx, sb2.ID, agentkernel.ExecParams{Command: "hostname"})
	if err != nil || strings.TrimSpace(res.Stdout) != sb2.ID {
		t.Fatalf("by default the sandbox runs in %q, want its own %s (%v)", res.Stdout, sb2.ID, err)
	}
}

func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
