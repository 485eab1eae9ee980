package postgres

import (
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

// BenchmarkWork measures the work queue's claim, ack and first heartbeat
// per item (issue 16), each sub-benchmark in its own fresh schema.
//
//	AGENTKERNEL_TEST_POSTGRES_URL=… go test -run '^$' -bench BenchmarkWork ./internal/store/postgres/
func BenchmarkWork(b *testing.B) {
	testURL(b)
	storetest.BenchmarkWork(b, func(tb testing.TB) store.WorkStore { return openTest(tb) })
}
