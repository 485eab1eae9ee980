package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestManagedBatchContract runs the AppendEventsBatch contract until the
// lead folds it into storetest.Exercise.
func TestManagedBatchContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseManagedBatch(context.Background(), t, func(t *testing.T) store.Store {
		return openTest(t)
	})
}

// BenchmarkManagedBatch measures the group commit:
//
//	go test -run '^$' -bench BenchmarkManagedBatch ./internal/store/postgres
func BenchmarkManagedBatch(b *testing.B) {
	storetest.BenchmarkManagedBatch(b, func(tb testing.TB) store.ManagedStore { return openTest(tb) })
}
