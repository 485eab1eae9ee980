package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// BenchmarkManaged measures the event log of Managed Agents sessions, the
// write every turn makes per streamed event: AppendEvents of one event per
// call (reports events/s)
//
//   - 1session/serial: one goroutine, one session (the latency floor);
//   - 1session/8goroutines: 8 goroutines on one session (they queue on the
//     session's counter);
//   - 100sessions/8goroutines: 8 goroutines spread over 100 sessions (many
//     sessions running turns at once).
func BenchmarkManaged(b *testing.B, newStore func(tb testing.TB) store.ManagedStore) {
	ctx := context.Background()
	b.Run("AppendEvents/1session/serial", func(b *testing.B) { benchMgAppend(ctx, b, newStore(b), 1, 1) })
	b.Run("AppendEvents/1session/8goroutines", func(b *testing.B) { benchMgAppend(ctx, b, newStore(b), 1, 8) })
	b.Run("AppendEvents/100sessions/8goroutines", func(b *testing.B) { benchMgAppend(ctx, b, newStore(b), 100, 8) })
}

func benchMgAppend(ctx context.Context, b *testing.B, s store.ManagedStore, sessions, workers int) {
	ids := make([]string, sessions)
	for i := range ids {
		m, err := s.CreateManagedSession(ctx, &store.ManagedSession{ID: fmt.Sprintf("sesn_bench_%03d", i), TenantID: "tnt_bench"})
		if err != nil {
			b.Fatalf("CreateManagedSession: %v", err)
		}
		ids[i] = m.ID
	}
	ev := []store.NewEvent{{Type: "agent.message",
		Data: json.RawMessage(`{"type":"agent.message","content":[{"type":"text","text":"a typical streamed chunk of about a hundred bytes"}]}`)}}
	var (
		wg   sync.WaitGroup
		once sync.Once
		fail error
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < b.N; i += workers {
				if _, err := s.AppendEvents(ctx, ids[i%sessions], ev); err != nil {
					once.Do(func() { fail = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if fail != nil {
		b.Fatalf("AppendEvents: %v", fail)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}
