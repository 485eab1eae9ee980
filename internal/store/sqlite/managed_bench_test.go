package sqlite

import (
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// BenchmarkManaged runs the Managed Agents event-log workload on every
// compiled-in driver:
//
//	go test -run '^$' -bench BenchmarkManaged ./internal/store/sqlite/
func BenchmarkManaged(b *testing.B) {
	for _, d := range Drivers() {
		b.Run(d, func(b *testing.B) {
			storetest.BenchmarkManaged(b, func(tb testing.TB) store.ManagedStore { return openTemp(tb, WithDriver(d)) })
		})
	}
}
