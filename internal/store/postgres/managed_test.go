package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestManagedContract runs the ManagedStore contract until the lead folds it
// into storetest.Exercise; every subtest gets its own fresh schema.
func TestManagedContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseManaged(context.Background(), t, func(t *testing.T) store.Store {
		return openTest(t)
	})
}
