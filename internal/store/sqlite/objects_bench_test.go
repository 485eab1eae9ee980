package sqlite

import (
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// BenchmarkObjects runs the durable-object storage workload on every
// compiled-in driver:
//
//	go test -run '^$' -bench BenchmarkObjects ./internal/store/sqlite/
func BenchmarkObjects(b *testing.B) {
	for _, d := range Drivers() {
		b.Run(d, func(b *testing.B) {
			storetest.BenchmarkObjects(b, func(tb testing.TB) store.ObjectStore { return openTemp(tb, WithDriver(d)) })
		})
	}
}
