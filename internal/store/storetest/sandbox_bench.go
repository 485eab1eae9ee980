package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// BenchmarkSandboxUpdates measures what a sandbox's state history costs
// its writes, on any engine, in one run:
//
//   - SameState: an UpdateSandbox that changes no state (the history is
//     read, nothing added) — what most sandbox writes are;
//   - NewState: an UpdateSandbox that changes state (cold and warming in
//     turn), each adding a history entry and, past the kept window,
//     trimming the oldest;
//   - Touch: TouchSandbox, the per-call activity write, which the history
//     never sees.
func BenchmarkSandboxUpdates(b *testing.B, newStore func(tb testing.TB) store.SandboxStore) {
	ctx := context.Background()
	run := func(b *testing.B, change func(i int, sb *store.Sandbox)) {
		s := newStore(b)
		sb, err := s.CreateSandbox(ctx, &store.Sandbox{TenantID: "tnt_bench", Image: "img"})
		if err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		b.ResetTimer()
		for i := range b.N {
			next := *sb
			change(i, &next)
			if sb, err = s.UpdateSandbox(ctx, &next); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("SameState", func(b *testing.B) {
		run(b, func(i int, sb *store.Sandbox) { sb.LastActivityAt = time.Unix(int64(i), 0) })
	})
	b.Run("NewState", func(b *testing.B) {
		run(b, func(i int, sb *store.Sandbox) {
			if len(sb.Handle) == 0 {
				now := time.Unix(int64(i), 0)
				sb.Handle, sb.StartedAt = json.RawMessage(`{"pid":1}`), &now
			} else {
				sb.Handle, sb.StartedAt = nil, nil
			}
		})
	})
	b.Run("Touch", func(b *testing.B) {
		s := newStore(b)
		sb, err := s.CreateSandbox(ctx, &store.Sandbox{TenantID: "tnt_bench", Image: "img"})
		if err != nil {
			b.Fatal(err)
		}
		b.ResetTimer()
		for i := range b.N {
			if err := s.TouchSandbox(ctx, sb.ID, time.Unix(int64(i), 0)); err != nil {
				b.Fatal(err)
			}
		}
	})
}
