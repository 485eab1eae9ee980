package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// BenchmarkObjects measures durable-object storage writes in write-through
// mode on any engine:
//
//   - ApplyStorageWrites/1: one small write per call (one transaction) to
//     one object, sequentially (reports writes/s);
//   - ApplyStorageWriteBatch/100x1: group commit of 100 objects with one
//     write each per transaction (reports writes/s).
func BenchmarkObjects(b *testing.B, newStore func(tb testing.TB) store.ObjectStore) {
	ctx := context.Background()
	b.Run("ApplyStorageWrites/1", func(b *testing.B) { benchObjApply(ctx, b, newStore(b)) })
	b.Run("ApplyStorageWriteBatch/100x1", func(b *testing.B) { benchObjBatch(ctx, b, newStore(b), 100) })
}

func benchObjCreate(ctx context.Context, b *testing.B, s store.ObjectStore, id string) store.ObjectKey {
	b.Helper()
	k := store.ObjectKey{TenantID: "tnt_bench", Class: "counter", ID: id}
	if _, err := s.CreateObject(ctx, &store.Object{ObjectKey: k}); err != nil {
		b.Fatalf("CreateObject: %v", err)
	}
	return k
}

// benchObjValue is a typical small value: a counter's state.
func benchObjValue(i int) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(`{"count":%d,"updated":"2026-02-16T00:00:00Z"}`, i))
}

func benchObjApply(ctx context.Context, b *testing.B, s store.ObjectStore) {
	k := benchObjCreate(ctx, b, s, "hot")
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		// Ten keys, so most writes overwrite as a live object does.
		w := []store.StorageWrite{{Key: fmt.Sprintf("k%d", i%10), Value: benchObjValue(i)}}
		if _, err := s.ApplyStorageWrites(ctx, k, w); err != nil {
			b.Fatalf("ApplyStorageWrites: %v", err)
		}
	}
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "writes/s")
}

func benchObjBatch(ctx context.Context, b *testing.B, s store.ObjectStore, objects int) {
	keys := make([]store.ObjectKey, objects)
	for i := range keys {
		keys[i] = benchObjCreate(ctx, b, s, fmt.Sprintf("obj-%03d", i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		batch := make(map[store.ObjectKey][]store.StorageWrite, objects)
		for _, k := range keys {
			batch[k] = []store.StorageWrite{{Key: fmt.Sprintf("k%d", i%10), Value: benchObjValue(i)}}
		}
		if err := s.ApplyStorageWriteBatch(ctx, batch); err != nil {
			b.Fatalf("ApplyStorageWriteBatch: %v", err)
		}
	}
	b.ReportMetric(float64(b.N*objects)/time.Since(start).Seconds(), "writes/s")
}
