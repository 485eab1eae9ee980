package postgres

import (
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// BenchmarkStore runs the shared store workload against Postgres, each
// sub-benchmark in its own fresh schema.
func BenchmarkStore(b *testing.B) {
	testURL(b)
	storetest.Benchmark(b, func(tb testing.TB) store.Store { return openTest(tb) })
}
