package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestObjectContract runs the ObjectStore contract on every compiled-in
// driver until the lead folds it into storetest.Exercise; every subtest gets
// a fresh database.
func TestObjectContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseObjects(context.Background(), t, func(t *testing.T) store.ObjectStore {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}
