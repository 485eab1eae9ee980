package storetest

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// BenchmarkWork measures the environment work queue's per-item cycle, what
// a worker does to start serving a session: ClaimWork (a poll), AckWork
// and the first HeartbeatWork. The queue holds b.N items made before the
// timer starts; a served item stays active under a long lease, so every
// poll's reaping looks at a growing set of live leases (reports items/s;
// ns/op is one item's cycle).
//
//   - serial: one worker;
//   - 4pollers: four workers polling one environment at once (they race
//     for the oldest item).
func BenchmarkWork(b *testing.B, newStore func(tb testing.TB) store.WorkStore) {
	ctx := context.Background()
	b.Run("ClaimAckHeartbeat/serial", func(b *testing.B) { benchWorkCycle(ctx, b, newStore(b), 1) })
	b.Run("ClaimAckHeartbeat/4pollers", func(b *testing.B) { benchWorkCycle(ctx, b, newStore(b), 4) })
}

func benchWorkCycle(ctx context.Context, b *testing.B, s store.WorkStore, workers int) {
	const tenant, env = "tnt_bench", "env_bench"
	t0 := time.Now().UTC().Truncate(time.Microsecond)
	for i := range b.N {
		if _, _, err := s.EnsureSessionWork(ctx, store.WorkItem{TenantID: tenant, EnvironmentID: env,
			SessionID: fmt.Sprintf("sesn_bench_%07d", i), CreatedAt: t0.Add(time.Duration(i) * time.Microsecond)}); err != nil {
			b.Fatalf("EnsureSessionWork: %v", err)
		}
	}
	var (
		wg   sync.WaitGroup
		once sync.Once
		fail error
		mu   sync.Mutex
		done int
	)
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			worker := fmt.Sprintf("worker-%d", w)
			for {
				now := time.Now()
				it, err := s.ClaimWork(ctx, store.ClaimWorkParams{TenantID: tenant, EnvironmentID: env, WorkerID: worker,
					Now: now, ReclaimOlderThan: time.Hour})
				if errors.Is(err, store.ErrNotFound) {
					return // the queue is served (or its last items are being taken)
				}
				if err == nil {
					_, err = s.AckWork(ctx, tenant, env, it.ID, now, time.Hour)
				}
				if err == nil {
					_, err = s.HeartbeatWork(ctx, store.HeartbeatWorkParams{TenantID: tenant, EnvironmentID: env, ID: it.ID,
						Now: now, TTL: time.Hour})
				}
				if err != nil {
					once.Do(func() { fail = err })
					return
				}
				mu.Lock()
				done++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	if fail != nil {
		b.Fatalf("work cycle: %v", fail)
	}
	if done != b.N {
		b.Fatalf("served %d items of %d", done, b.N)
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "items/s")
}
