package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestLeaseContract runs the LeaseStore and fencing contract on every
// compiled-in driver; every subtest gets a fresh database.
func TestLeaseContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseLeases(context.Background(), t, func(t *testing.T) store.Store {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}
