package sqlite

import (
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// BenchmarkWork measures the work queue's claim, ack and first heartbeat
// per item (issue 16) on every compiled-in driver.
//
//	go test -run '^$' -bench BenchmarkWork ./internal/store/sqlite/
func BenchmarkWork(b *testing.B) {
	for _, d := range Drivers() {
		b.Run(d, func(b *testing.B) {
			storetest.BenchmarkWork(b, func(tb testing.TB) store.WorkStore { return openTemp(tb, WithDriver(d)) })
		})
	}
}
