package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestVaultContract runs the VaultStore contract; every subtest gets its
// own fresh schema.
func TestVaultContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseVaults(context.Background(), t, func(t *testing.T) store.VaultStore {
		return openTest(t)
	})
}
