package sqlite

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// TestMonitorContract runs the MonitorStore contract on every compiled-in
// driver; every subtest gets its own fresh database.
func TestMonitorContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.ExerciseMonitor(context.Background(), t, func(t *testing.T) store.MonitorStore {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}

// BenchmarkMonitor: go test ./internal/store/sqlite -run '^$' -bench Monitor
func BenchmarkMonitor(b *testing.B) {
	storetest.BenchmarkMonitor(b, func(tb testing.TB) store.MonitorStore { return openTemp(tb) })
}
