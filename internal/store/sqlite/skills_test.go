package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestSkillContract runs the SkillStore contract on every compiled-in
// driver; every subtest gets its own fresh database.
func TestSkillContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseSkills(context.Background(), t, func(t *testing.T) store.SkillStore {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}
