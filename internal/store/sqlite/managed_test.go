package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestManagedContract runs the ManagedStore contract on every compiled-in
// driver until the lead folds it into storetest.Exercise; every subtest
// gets its own fresh database.
func TestManagedContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseManaged(context.Background(), t, func(t *testing.T) store.Store {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}
