package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestVaultContract runs the VaultStore contract on every compiled-in
// driver; every subtest gets its own fresh database.
func TestVaultContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseVaults(context.Background(), t, func(t *testing.T) store.VaultStore {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}
