package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestMemoryStoreContract runs the MemoryStores contract on every
// compiled-in driver; every subtest gets its own fresh database.
func TestMemoryStoreContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseMemoryStores(context.Background(), t, func(t *testing.T) store.MemoryStores {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}
