package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestLeaseContract runs the LeaseStore and fencing contract; every
// subtest gets its own fresh schema.
func TestLeaseContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseLeases(context.Background(), t, func(t *testing.T) store.Store {
		return openTest(t)
	})
}
