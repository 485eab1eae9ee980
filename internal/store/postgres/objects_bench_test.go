package postgres

import (
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// BenchmarkObjects runs the durable-object storage workload against
// Postgres, each sub-benchmark in its own fresh schema:
//
//	AGENTKERNEL_TEST_POSTGRES_URL=... go test -run '^$' -bench BenchmarkObjects ./internal/store/postgres/
func BenchmarkObjects(b *testing.B) {
	testURL(b)
	storetest.BenchmarkObjects(b, func(tb testing.TB) store.ObjectStore { return openTest(tb) })
}
