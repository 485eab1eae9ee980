package postgres

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestMonitorContract runs the MonitorStore contract; every subtest gets
// its own fresh schema.
func TestMonitorContract(t *testing.T) {
	testURL(t)
	storetest.ExerciseMonitor(context.Background(), t, func(t *testing.T) store.MonitorStore {
		return openTest(t)
	})
}

// BenchmarkMonitor: AGENTKERNEL_TEST_POSTGRES_URL=… go test ./internal/store/postgres -run '^$' -bench Monitor
func BenchmarkMonitor(b *testing.B) {
	storetest.BenchmarkMonitor(b, func(tb testing.TB) store.MonitorStore { return openTest(tb) })
}
