package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestPackageBuildContract runs the PackageBuildStore contract on every
// compiled-in driver.
func TestPackageBuildContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExercisePackageBuilds(context.Background(), t, func(t *testing.T) store.PackageBuildStore {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}
