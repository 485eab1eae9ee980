package storetest

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// BenchmarkMonitor measures the monitor's ingest path on any engine:
//
//   - AppendAgentEvents/1x8x100: one event per call (heartbeats and work
//     events alternating) from 8 goroutines across 100 sandboxes, each
//     append updating its sandbox's summary in the same transaction
//     (reports events/s; the target is >= 10,000/s);
//   - ListActivities/1000: one monitor check's read of 1,000 summaries
//     (reports ms/check).
func BenchmarkMonitor(b *testing.B, newStore func(tb testing.TB) store.MonitorStore) {
	ctx := context.Background()
	b.Run("AppendAgentEvents/1x8x100", func(b *testing.B) { monBenchAppend(ctx, b, newStore(b), 8, 100) })
	b.Run("ListActivities/1000", func(b *testing.B) { monBenchList(ctx, b, newStore(b), 1000) })
}

func monBenchAppend(ctx context.Context, b *testing.B, s store.MonitorStore, workers, sandboxes int) {
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, workers)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				ev := store.NewAgentEvent{Type: store.EventToolUse, Payload: []byte(`{"tool":"bash","input":"go test ./..."}`)}
				if i%2 == 0 {
					ev = store.NewAgentEvent{Type: store.EventHeartbeat, HeartbeatStatus: store.HeartbeatRunning}
				}
				if _, err := s.AppendAgentEvents(ctx, store.AppendAgentEventsParams{
					SandboxID: fmt.Sprintf("sbx_bench_%03d", i%int64(sandboxes)), Events: []store.NewAgentEvent{ev}}); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	for _, err := range errs {
		if err != nil {
			b.Fatalf("AppendAgentEvents: %v", err)
		}
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}

func monBenchList(ctx context.Context, b *testing.B, s store.MonitorStore, sandboxes int) {
	for i := range sandboxes {
		if _, err := s.AppendAgentEvents(ctx, store.AppendAgentEventsParams{SandboxID: fmt.Sprintf("sbx_bench_%04d", i),
			Events: []store.NewAgentEvent{{Type: store.EventHeartbeat, HeartbeatStatus: store.HeartbeatIdle},
				{Type: store.EventToolUse}}}); err != nil {
			b.Fatalf("AppendAgentEvents: %v", err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		got, err := s.ListActivities(ctx, store.ListActivitiesParams{})
		if err != nil || len(got) != sandboxes {
			b.Fatalf("ListActivities: %d activities, %v", len(got), err)
		}
	}
	b.ReportMetric(time.Since(start).Seconds()*1000/float64(b.N), "ms/check")
}
