package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestPackageBuildContract runs the PackageBuildStore contract.
func TestPackageBuildContract(t *testing.T) {
	testURL(t)
	storetest.ExercisePackageBuilds(context.Background(), t, func(t *testing.T) store.PackageBuildStore {
		return openTest(t)
	})
}
