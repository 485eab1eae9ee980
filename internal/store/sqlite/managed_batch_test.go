package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestManagedBatchContract runs the AppendEventsBatch contract on every
// compiled-in driver until the lead folds it into storetest.Exercise.
func TestManagedBatchContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseManagedBatch(context.Background(), t, func(t *testing.T) store.Store {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}

// BenchmarkManagedBatch measures the group commit on every compiled-in
// driver:
//
//	go test -run '^$' -bench BenchmarkManagedBatch ./internal/store/sqlite/
func BenchmarkManagedBatch(b *testing.B) {
	for _, d := range Drivers() {
		b.Run(d, func(b *testing.B) {
			storetest.BenchmarkManagedBatch(b, func(tb testing.TB) store.ManagedStore { return openTemp(tb, WithDriver(d)) })
		})
	}
}
