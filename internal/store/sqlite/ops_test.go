package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestOpContract runs the OpStore contract on every compiled-in driver;
// every subtest gets its own fresh database.
func TestOpContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseOps(context.Background(), t, func(t *testing.T) store.OpStore {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}
