package sandbox_test

import (
	"context"
	"os/exec"
	"sort"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// BenchmarkWake measures cold → first exec answered through the manager
// (process driver, workspace still on disk: no restore), against the bare
// driver floor `bwrap --ro-bind / / true` timed in the same run, without
// the warm pool (pool=off: bwrap and the guest start at every wake) and
// with it (pool=on: the wake takes a pooled sandbox; the pool refills
// while the sandbox hibernates, outside the timed part).
//
//	go test -run '^$' -bench Wake -benchtime 30x ./internal/sandbox/
func BenchmarkWake(b *testing.B) {
	for _, pool := range []int{0, 1} {
		b.Run(map[int]string{0: "pool=off", 1: "pool=on"}[pool], func(b *testing.B) {
			ctx := context.Background()
			var e *env
			if pool > 0 {
				e = newPoolEnv(b, pool)
			} else {
				e = newBenchEnv(b)
			}
			in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
			if err != nil {
				b.Fatal(err)
			}
			var wake, floor []time.Duration
			for b.Loop() {
				b.StopTimer()
				if _, err := e.m.Hibernate(ctx, "t1", in.ID); err != nil {
					b.Fatal(err)
				}
				if pool > 0 {
					waitPool(b, e.m)
				}
				start := time.Now()
				if err := exec.Command("bwrap", "--ro-bind", "/", "/", "true").Run(); err != nil {
					b.Fatal(err)
				}
				floor = append(floor, time.Since(start))
				b.StartTimer()
				start = time.Now()
				res, err := e.m.Exec(ctx, "t1", in.ID, guest.ExecRequest{Argv: []string{"true"}}, nil)
				if err != nil || res.ExitCode != 0 {
					b.Fatalf("%+v %v", res, err)
				}
				wake = append(wake, time.Since(start))
			}
			b.ReportMetric(ms(pct(wake, 50)), "wake-p50-ms")
			b.ReportMetric(ms(pct(wake, 95)), "wake-p95-ms")
			b.ReportMetric(ms(pct(wake, 99)), "wake-p99-ms")
			b.ReportMetric(ms(pct(floor, 50)), "floor-p50-ms")
		})
	}
}

// BenchmarkExecRoundTrip: exec of `true` through the manager (lazy wrapper,
// activity, guest over the unix socket) against os/exec of `true`.
//
//	go test -run '^$' -bench ExecRoundTrip -benchtime 200x ./internal/sandbox/
func BenchmarkExecRoundTrip(b *testing.B) {
	ctx := context.Background()
	e := newBenchEnv(b)
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
	if err != nil {
		b.Fatal(err)
	}
	var through, direct []time.Duration
	for b.Loop() {
		start := time.Now()
		if _, err := e.m.Exec(ctx, "t1", in.ID, guest.ExecRequest{Argv: []string{"true"}}, nil); err != nil {
			b.Fatal(err)
		}
		through = append(through, time.Since(start))
		start = time.Now()
		if err := exec.Command("true").Run(); err != nil {
			b.Fatal(err)
		}
		direct = append(direct, time.Since(start))
	}
	b.ReportMetric(ms(pct(through, 50)), "manager-p50-ms")
	b.ReportMetric(ms(pct(direct, 50)), "direct-p50-ms")
	b.ReportMetric(ms(pct(through, 50)-pct(direct, 50)), "overhead-p50-ms")
}

func pct(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[(len(s)-1)*p/100]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
