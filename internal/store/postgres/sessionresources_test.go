package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestSessionResourceContract runs the SessionResourceStore contract; every
// subtest gets its own fresh schema.
func TestSessionResourceContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseSessionResources(context.Background(), t, func(t *testing.T) storetest.SessionResourceStorer {
		return openTest(t)
	})
}
