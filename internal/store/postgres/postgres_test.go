package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestContract runs the one contract suite against a real Postgres; every
// subtest gets its own fresh schema, dropped when it ends.
func TestContract(t *testing.T) {
	testURL(t)
	storetest.Exercise(context.Background(), t, func(t *testing.T) store.Store {
		return openTest(t)
	})
}
