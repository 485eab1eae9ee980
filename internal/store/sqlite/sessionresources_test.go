package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestSessionResourceContract runs the SessionResourceStore contract on
// every compiled-in driver.
func TestSessionResourceContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseSessionResources(context.Background(), t, func(t *testing.T) storetest.SessionResourceStorer {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}
