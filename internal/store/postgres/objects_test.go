package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestObjectContract runs the ObjectStore contract until the lead folds it
// into storetest.Exercise; every subtest gets its own fresh schema.
func TestObjectContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseObjects(context.Background(), t, func(t *testing.T) store.ObjectStore {
		return openTest(t)
	})
}
