package storetest

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Benchmark runs the same store workload on any engine, so engines (and
// drivers of one engine) compare on agentkernel's own access pattern:
//
//   - AppendMessages/1 and /100: one message per call and batches of 100
//     (reports msgs/s);
//   - CompareAndSetStatus/contention8: 8 goroutines racing CAS with the
//     version they last saw (reports CAS/s that won, and the win ratio);
//   - SaveStateAndPromoteStaging: one staged step promoted per call with a
//     checkpoint, the per-step commit of the agent loop (reports p50/p99 of
//     the primitive alone; ns/op includes the staging call).
func Benchmark(b *testing.B, newStore func(tb testing.TB) store.Store) {
	ctx := context.Background()
	b.Run("AppendMessages/1", func(b *testing.B) { benchAppend(ctx, b, newStore(b), 1) })
	b.Run("AppendMessages/100", func(b *testing.B) { benchAppend(ctx, b, newStore(b), 100) })
	b.Run("CompareAndSetStatus/contention8", func(b *testing.B) { benchCAS(ctx, b, newStore(b), 8) })
	b.Run("SaveStateAndPromoteStaging", func(b *testing.B) { benchSaveAndPromote(ctx, b, newStore(b)) })
}

func benchSession(ctx context.Context, b *testing.B, s store.Store) string {
	b.Helper()
	sess, err := s.CreateSession(ctx, store.CreateSessionParams{ID: "sesn_bench", AgentType: "bench"})
	if err != nil {
		b.Fatalf("CreateSession: %v", err)
	}
	return sess.ID
}

func benchAppend(ctx context.Context, b *testing.B, s store.Store, batch int) {
	id := benchSession(ctx, b, s)
	msgs := make([]store.NewMessage, batch)
	for i := range msgs {
		msgs[i] = store.NewMessage{Role: "assistant",
			Content: []byte(`{"type":"text","text":"a typical assistant message of modest length, about a hundred bytes"}`)}
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for range b.N {
		if _, err := s.AppendMessages(ctx, id, msgs); err != nil {
			b.Fatalf("AppendMessages: %v", err)
		}
	}
	b.ReportMetric(float64(b.N*batch)/time.Since(start).Seconds(), "msgs/s")
}

func benchCAS(ctx context.Context, b *testing.B, s store.Store, workers int) {
	id := benchSession(ctx, b, s)
	var wins, attempts atomic.Int64
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			version := int64(-1) // unknown: the first attempt learns it
			for i := w; i < b.N; i += workers {
				next := store.StatusPaused
				if i%2 == 0 {
					next = store.StatusActive
				}
				p := store.CompareAndSetStatusParams{SessionID: id, New: next,
					Expected: []store.SessionStatus{store.StatusActive, store.StatusPaused}}
				if version >= 0 {
					p.ExpectedVersion = &version
				}
				res, err := s.CompareAndSetStatus(ctx, p)
				if err != nil {
					errs <- err
					return
				}
				attempts.Add(1)
				if res.OK {
					wins.Add(1)
					version = res.NewVersion
				} else {
					version = res.CurrentVersion
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	close(errs)
	if err := <-errs; err != nil {
		b.Fatalf("CompareAndSetStatus: %v", err)
	}
	b.ReportMetric(float64(wins.Load())/elapsed.Seconds(), "CAS/s")
	if n := attempts.Load(); n > 0 {
		b.ReportMetric(float64(wins.Load())/float64(n), "win-ratio")
	}
}

func benchSaveAndPromote(ctx context.Context, b *testing.B, s store.Store) {
	id := benchSession(ctx, b, s)
	lat := make([]time.Duration, 0, b.N)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		step := fmt.Sprintf("step_%d", i)
		if err := s.StageChanges(ctx, store.StagedChange{SessionID: id, StepID: step,
			Messages:    []store.NewMessage{{Role: "tool", Content: []byte(`{"type":"tool_result","content":"ok"}`)}},
			StateWrites: []byte(`{"last_step":"` + step + `"}`)}); err != nil {
			b.Fatalf("StageChanges: %v", err)
		}
		t0 := time.Now()
		_, err := s.SaveStateAndPromoteStaging(ctx, store.SaveAndPromoteParams{SessionID: id,
			State: store.SessionState{Status: store.StatusActive, StepCount: int64(i % 20),
				CustomState: []byte(`{"plan":["read","write"],"notes":"x"}`)},
			AppendMessages: []store.NewMessage{{Role: "assistant", Content: []byte(`{"type":"tool_use","name":"read"}`)}},
			Checkpoint:     store.CheckpointMeta{StepCount: int64(i % 20)}})
		lat = append(lat, time.Since(t0))
		if err != nil {
			b.Fatalf("SaveStateAndPromoteStaging: %v", err)
		}
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)*50/100].Nanoseconds()), "p50-ns")
		b.ReportMetric(float64(lat[min(len(lat)-1, len(lat)*99/100)].Nanoseconds()), "p99-ns")
	}
}
