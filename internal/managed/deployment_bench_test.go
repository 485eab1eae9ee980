package managed

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// benchDeployments is a sqlite service on a fake clock holding n
// deployments firing every minute, none due yet.
func benchDeployments(b *testing.B, n int) (*Service, *DeploymentScheduler, *clock.Fake) {
	b.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if _, err := st.CreateTenant(ctx, store.Tenant{ID: "ten_a", Name: "a"}); err != nil {
		b.Fatal(err)
	}
	clk := clock.NewFake(time.Date(2030, 1, 7, 12, 0, 30, 0, time.UTC))
	s := New(Options{Store: st, Now: clk.Now, Events: session.NewEventLog(st, session.EventLogConfig{})})
	a, err := s.CreateAgent(ctx, "ten_a", mustBody(`{"name": "a", "model": "claude-sonnet-4-5"}`))
	if err != nil {
		b.Fatal(err)
	}
	e, err := s.CreateEnvironment(ctx, "ten_a", mustBody(`{"name": "e"}`))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := s.CreateDeployment(ctx, "ten_a", mustBody(fmt.Sprintf(`{"agent": %q, "environment_id": %q, "name": "d",
			"initial_events": [{"type": "user.message", "content": [{"type": "text", "text": "tick"}]}],
			"schedule": {"expression": "* * * * *", "timezone": "UTC"}}`, a["id"], e["id"]))); err != nil {
			b.Fatal(err)
		}
	}
	return s, s.NewDeploymentScheduler(SchedulerConfig{Clock: clk, Batch: n}), clk
}

func mustBody(s string) Obj {
	o, err := ParseBody([]byte(s))
	if err != nil {
		panic(err)
	}
	return o
}

// BenchmarkDeploymentPollIdle is one poll over 1,000 deployments none of
// which is due: the scheduler's standing cost.
func BenchmarkDeploymentPollIdle(b *testing.B) {
	_, sched, _ := benchDeployments(b, 1000)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if n, err := sched.Poll(ctx); err != nil || n != 0 {
			b.Fatalf("poll: %d %v", n, err)
		}
	}
}

// BenchmarkDeploymentClaimAndStart is one poll finding 1,000 deployments
// due; ns/run is the cost of one scheduled run: its claim (run row and
// next fire, one transaction) and its session's creation (session and
// initial event, one transaction) and the run's session id.
func BenchmarkDeploymentClaimAndStart(b *testing.B) {
	_, sched, clk := benchDeployments(b, 1000)
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		clk.Advance(time.Minute) // every deployment is due
		if n, err := sched.Poll(ctx); err != nil || n != 1000 {
			b.Fatalf("poll: %d %v", n, err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*1000), "ns/run")
}
