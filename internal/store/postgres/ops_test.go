package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestOpContract runs the OpStore contract; every subtest gets its own
// fresh schema.
func TestOpContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseOps(context.Background(), t, func(t *testing.T) store.OpStore {
		return openTest(t)
	})
}
