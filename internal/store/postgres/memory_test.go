package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestMemoryStoreContract runs the MemoryStores contract; every subtest
// gets its own fresh schema.
func TestMemoryStoreContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseMemoryStores(context.Background(), t, func(t *testing.T) store.MemoryStores {
		return openTest(t)
	})
}
