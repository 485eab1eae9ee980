package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestFileContract runs the FileStore contract on every compiled-in
// driver; every subtest gets its own fresh database.
func TestFileContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseFiles(context.Background(), t, func(t *testing.T) store.FileStore {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}
