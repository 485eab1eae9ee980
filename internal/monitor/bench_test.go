package monitor_test

import (
	"context"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/monitor"
	"github.com/agentkernel/agentkernel/internal/store"
)

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCheck1000 is one monitor check over 1,000 monitored sandboxes
// (activity rows seeded in SQLite: alive, working, nothing to reap).
func BenchmarkCheck1000(b *testing.B) {
	e := newEnv(b)
	s := e.service(func(c *monitor.Config) { c.NoPumps = true })
	ctx := context.Background()
	for i := range 1000 {
		sbx := fmt.Sprintf("sbx_bench%04d", i)
		if _, err := s.Ingest(ctx, sbx, []monitor.EventInput{{Type: "agent.started"}, {Type: "agent.heartbeat", Status: "running"}, {Type: "agent.tool_use"}}); err != nil {
			b.Fatal(err)
		}
	}
	if rep := s.CheckOnce(ctx); rep.Checked != 1000 || len(rep.Terminated) != 0 || rep.Err != nil {
		b.Fatalf("check: %+v", rep)
	}
	b.ResetTimer()
	cpu0 := cpuTime()
	for b.Loop() {
		if rep := s.CheckOnce(ctx); rep.Checked != 1000 {
			b.Fatal(rep.Err)
		}
	}
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/check")
}

// BenchmarkIngest is agent events stored per second through the monitor's
// ingest (validation + ordered append + activity summary in one
// transaction), in batches as the guest relay delivers them.
func BenchmarkIngest(b *testing.B) {
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			e := newEnv(b)
			s := e.service(func(c *monitor.Config) { c.NoPumps = true })
			ctx := context.Background()
			evs := make([]monitor.EventInput, batch)
			for i := range evs {
				evs[i] = monitor.EventInput{Type: store.EventToolUse, Data: []byte(`{"tool":"bash","input":"ls -la"}`)}
				if i%10 == 0 {
					evs[i] = monitor.EventInput{Type: store.EventHeartbeat, Status: "running"}
				}
			}
			n := 0
			start := time.Now()
			for b.Loop() {
				if _, err := s.Ingest(ctx, fmt.Sprintf("sbx_ing%02d", n%10), evs); err != nil {
					b.Fatal(err)
				}
				n++
			}
			b.ReportMetric(float64(n*batch)/time.Since(start).Seconds(), "events/s")
		})
	}
}
