package postgres

import (
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// BenchmarkManaged runs the Managed Agents event-log workload against
// Postgres, each sub-benchmark in its own fresh schema:
//
//	AGENTKERNEL_TEST_POSTGRES_URL=… go test -run '^$' -bench BenchmarkManaged ./internal/store/postgres/
func BenchmarkManaged(b *testing.B) {
	testURL(b)
	storetest.BenchmarkManaged(b, func(tb testing.TB) store.ManagedStore { return openTest(tb) })
}
