package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// BenchmarkManagedBatch measures AppendEventsBatch, the group commit of
// the session event log: each call stores one event for each of `sessions`
// sessions (as 100 concurrent turns streaming produce). b.N counts events;
// reports events/s.
func BenchmarkManagedBatch(b *testing.B, newStore func(tb testing.TB) store.ManagedStore) {
	ctx := context.Background()
	for _, sessions := range []int{10, 100} {
		b.Run(fmt.Sprintf("AppendEventsBatch/%dsessions", sessions), func(b *testing.B) {
			benchMgBatch(ctx, b, newStore(b), sessions)
		})
	}
}

func benchMgBatch(ctx context.Context, b *testing.B, s store.ManagedStore, sessions int) {
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
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for done := 0; done < b.N; done += sessions {
		batch := make(map[string][]store.NewEvent, sessions)
		for _, id := range ids[:min(sessions, b.N-done)] {
			batch[id] = ev
		}
		if _, err := s.AppendEventsBatch(ctx, batch); err != nil {
			b.Fatalf("AppendEventsBatch: %v", err)
		}
	}
	elapsed := time.Since(start)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
}
