package docker

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/sandboxtest"
)

// waitHealthy polls the guest until /health answers ok.
func waitHealthy(ctx context.Context, c *guest.Client) (*guest.Health, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, time.Second)
		h, err := c.Health(actx)
		cancel()
		if err == nil && h.OK {
			return h, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("guest never became healthy: %w (last: %v)", ctx.Err(), err)
		case <-time.After(time.Millisecond):
		}
	}
}

func TestRealGuest(t *testing.T) {
	d := engine(t)
	spec := newSpec(t, realGuest(t))
	h := start(t, d, spec)
	c := sandboxtest.Client(d, h)
	defer c.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	health, err := waitHealthy(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if health.PID != 1 {
		t.Errorf("guest pid %d, want 1", health.PID)
	}
	out, _, res, err := c.ExecOutput(ctx, guest.ExecRequest{Shell: "ls /sys/class/net; pwd"})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v %+v", err, res)
	}
	if got := strings.Fields(string(out)); !slices.Equal(got, []string{"lo", sandbox.WorkspacePath}) {
		t.Errorf("exec saw %q, want only lo and cwd /workspace", got)
	}
	if err := d.Stop(ctx, h, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	st, err := d.Inspect(ctx, h)
	if err != nil {
		t.Fatal(err)
	}
	if st.Running {
		t.Errorf("still running after Stop: %+v", st)
	}
	t.Logf("guest exit code after SIGTERM: %d", st.ExitCode)
}

// TestWakeLatency prints wake latency (Start → first healthy guest answer)
// against the floor of `docker run --rm IMAGE true` timed through the CLI.
// It runs only when AGENTKERNEL_DOCKER_BENCH=<runs> is set:
//
//	AGENTKERNEL_DOCKER_BENCH=20 go test -run TestWakeLatency -v ./internal/sandbox/docker/
func TestWakeLatency(t *testing.T) {
	runs, _ := strconv.Atoi(os.Getenv("AGENTKERNEL_DOCKER_BENCH"))
	if runs <= 0 {
		t.Skip("set AGENTKERNEL_DOCKER_BENCH=<runs> to measure wake latency")
	}
	d := engine(t)
	guestBin := realGuest(t)
	dockerCLI, err := exec.LookPath("docker")
	if err != nil {
		t.Skip("docker CLI not found for the floor measurement")
	}
	ctx := t.Context()

	var wake, start, floor []time.Duration
	for i := range runs {
		spec := newSpec(t, guestBin)
		t0 := time.Now()
		h, err := d.Start(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		t1 := time.Now()
		c := sandboxtest.Client(d, h)
		hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = waitHealthy(hctx, c)
		t2 := time.Now()
		cancel()
		c.Close()
		if err := d.Destroy(context.Background(), h); err != nil {
			t.Fatal(err)
		}
		if err != nil {
			t.Fatalf("run %d: %v", i, err)
		}
		start = append(start, t1.Sub(t0))
		wake = append(wake, t2.Sub(t0))

		// Interleaved so both see the same machine load.
		f0 := time.Now()
		if out, err := exec.CommandContext(ctx, dockerCLI, "run", "--rm", "--network", "none", DefaultImage, "true").CombinedOutput(); err != nil {
			t.Fatalf("docker run: %v\n%s", err, out)
		}
		floor = append(floor, time.Since(f0))
	}
	t.Logf("%d runs, image %s", runs, DefaultImage)
	t.Logf("%-40s %9s %9s %9s", "measure", "p50", "p90", "min")
	for _, r := range []struct {
		name string
		ds   []time.Duration
	}{
		{"driver Start (create+start)", start},
		{"wake: Start → guest Health ok", wake},
		{"floor: docker run --rm IMAGE true (CLI)", floor},
	} {
		slices.Sort(r.ds)
		t.Logf("%-40s %9s %9s %9s", r.name, pct(r.ds, 50), pct(r.ds, 90), pct(r.ds, 0))
	}
}

func pct(sorted []time.Duration, p int) time.Duration {
	i := (len(sorted)*p + 99) / 100
	return sorted[max(i-1, 0)].Round(100 * time.Microsecond)
}
