package process

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/sandboxtest"
)

// Figures, not assertions:
//
//	go test -run '^$' -bench . -benchtime 50x ./internal/sandbox/process/

// reportPercentiles adds p50/p95 of the samples in milliseconds.
func reportPercentiles(b *testing.B, samples []time.Duration) {
	if len(samples) == 0 {
		return
	}
	sort.Slice(samples, func(i, j int) bool { return samples[i] < samples[j] })
	pick := func(p float64) float64 {
		return float64(samples[int(p*float64(len(samples)-1))].Microseconds()) / 1000
	}
	b.ReportMetric(pick(0.50), "p50-ms")
	b.ReportMetric(pick(0.95), "p95-ms")
}

func benchSpec(b *testing.B, guestBin string) sandbox.Spec {
	run, err := os.MkdirTemp("", "akbench")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { os.RemoveAll(run) })
	return sandbox.Spec{ID: "sbx-bench", WorkspaceDir: b.TempDir(), RunDir: run, GuestBinary: guestBin, Secret: guest.NewSecret()}
}

// BenchmarkWake: Start → first successful Health over the socket, without
// limits, with the default limits in cgroups (created, written and joined on
// every start), and with the rlimit fallback:
//
//	go test -run '^$' -bench Wake -benchtime 50x ./internal/sandbox/process/
func BenchmarkWake(b *testing.B) {
	requireBwrap(b)
	guestBin := sandboxtest.BuildGuest(b)
	defaults := sandbox.DefaultLimitPolicy().Default
	for _, v := range []struct {
		name   string
		cfg    Config
		limits sandbox.Limits
		want   string
	}{
		{"limits=none", Config{GuestArgs: []string{}}, sandbox.Limits{}, "none"},
		{"limits=cgroup", Config{GuestArgs: []string{}}, defaults, "cgroup"},
		{"limits=rlimit", Config{GuestArgs: []string{}, DisableCgroups: true}, defaults, "rlimit"},
	} {
		b.Run(v.name, func(b *testing.B) {
			d, err := New(v.cfg)
			if err != nil {
				b.Fatal(err)
			}
			spec := benchSpec(b, guestBin)
			spec.Limits = v.limits
			benchWake(b, d, spec, v.want)
		})
	}
}

func benchWake(b *testing.B, d *Driver, spec sandbox.Spec, wantLimits string) {
	ctx := context.Background()
	var samples []time.Duration
	b.ResetTimer()
	for range b.N {
		begin := time.Now()
		h, err := d.Start(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		c := sandboxtest.Client(d, h)
		for {
			if _, err := c.Health(ctx); err == nil {
				break
			}
			time.Sleep(200 * time.Microsecond)
		}
		samples = append(samples, time.Since(begin))
		b.StopTimer()
		if st, err := d.Inspect(ctx, h); err != nil || st.LimitsApplied != wantLimits {
			b.Fatalf("limits applied %+v %v, want %s", st, err, wantLimits)
		}
		c.Close()
		if err := d.Destroy(ctx, h); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportPercentiles(b, samples)
}

// BenchmarkBwrapFloor: the bare floor, `bwrap --ro-bind / / true`.
func BenchmarkBwrapFloor(b *testing.B) {
	requireBwrap(b)
	var samples []time.Duration
	for range b.N {
		begin := time.Now()
		if err := exec.Command("bwrap", "--ro-bind", "/", "/", "true").Run(); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(begin))
	}
	reportPercentiles(b, samples)
}

// BenchmarkExecGuest: round trip of `true` through the guest in a sandbox.
func BenchmarkExecGuest(b *testing.B) {
	requireBwrap(b)
	d, err := New(Config{GuestArgs: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	h, err := d.Start(ctx, benchSpec(b, sandboxtest.BuildGuest(b)))
	if err != nil {
		b.Fatal(err)
	}
	defer d.Destroy(ctx, h)
	c := sandboxtest.Client(d, h)
	defer c.Close()
	sandboxtest.WaitHealthy(b, c)
	var samples []time.Duration
	b.ResetTimer()
	for range b.N {
		begin := time.Now()
		res, err := c.Exec(ctx, guest.ExecRequest{Argv: []string{"true"}}, nil)
		if err != nil || res.ExitCode != 0 {
			b.Fatal(res, err)
		}
		samples = append(samples, time.Since(begin))
	}
	reportPercentiles(b, samples)
}

// BenchmarkExecDirect: `true` through os/exec on the host, for comparison.
func BenchmarkExecDirect(b *testing.B) {
	var samples []time.Duration
	for range b.N {
		begin := time.Now()
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(begin))
	}
	reportPercentiles(b, samples)
}

// BenchmarkCgroupSetup: what limits add to every start on their own —
// create the sandbox's cgroups with the default limits, then remove them.
func BenchmarkCgroupSetup(b *testing.B) {
	defaults := sandbox.DefaultLimitPolicy().Default
	var samples []time.Duration
	for i := range b.N {
		begin := time.Now()
		cg, err := createCgroups("/sys/fs/cgroup", "sbx-bench-cg-"+strconv.Itoa(i), defaults)
		if err != nil {
			b.Skipf("no writable cgroups: %v", err)
		}
		samples = append(samples, time.Since(begin))
		if err := removeCgroups(cg.dirs); err != nil {
			b.Fatal(err)
		}
	}
	reportPercentiles(b, samples)
}

// BenchmarkWakePooled: the driver's part of a wake from the warm pool —
// the sandbox (default limits in cgroups) was started ahead with a pool
// pipe (untimed); timed is renaming its run dir to the sandbox's, Adopt,
// and the guest's answer to POST /assign. BenchmarkWake's limits=cgroup
// is the same wake without the pool.
//
//	go test -run '^$' -bench 'Wake' -benchtime 100x ./internal/sandbox/process/
func BenchmarkWakePooled(b *testing.B) {
	requireBwrap(b)
	guestBin := sandboxtest.BuildGuest(b)
	d, err := New(Config{GuestArgs: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	parent := b.TempDir()
	var samples []time.Duration
	b.ResetTimer()
	for i := range b.N {
		b.StopTimer()
		spec := benchSpec(b, guestBin)
		spec.ID = "wrm-bench-" + strconv.Itoa(i)
		spec.Limits = sandbox.DefaultLimitPolicy().Default
		r, w, err := os.Pipe()
		if err != nil {
			b.Fatal(err)
		}
		spec.PoolPipe = r
		h, err := d.Start(ctx, spec)
		r.Close()
		if err != nil {
			b.Fatal(err)
		}
		c := sandboxtest.Client(d, h)
		sandboxtest.WaitHealthy(b, c)
		c.Close()
		newRun := filepath.Join(parent, "sbx-"+strconv.Itoa(i))
		b.StartTimer()
		begin := time.Now()
		if err := os.Rename(spec.RunDir, newRun); err != nil {
			b.Fatal(err)
		}
		h2, err := d.Adopt(ctx, h, sandbox.Spec{ID: "sbx-bench-" + strconv.Itoa(i), RunDir: newRun})
		if err != nil {
			b.Fatal(err)
		}
		c = sandboxtest.Client(d, h2)
		if err := c.Assign(ctx, map[string]string{"K": "v"}); err != nil {
			b.Fatal(err)
		}
		samples = append(samples, time.Since(begin))
		b.StopTimer()
		w.Close()
		c.Close()
		if err := d.Destroy(ctx, h2); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
	reportPercentiles(b, samples)
}
