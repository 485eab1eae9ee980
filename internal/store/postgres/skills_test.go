package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestSkillContract runs the SkillStore contract; every subtest gets its
// own fresh schema.
func TestSkillContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseSkills(context.Background(), t, func(t *testing.T) store.SkillStore {
		return openTest(t)
	})
}
