package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestFileContract runs the FileStore contract; every subtest gets its
// own fresh schema.
func TestFileContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseFiles(context.Background(), t, func(t *testing.T) store.FileStore {
		return openTest(t)
	})
}
