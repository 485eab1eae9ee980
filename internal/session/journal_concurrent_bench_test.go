package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// BenchmarkToolJournalConcurrent measures bash tool calls made by 4
// callers at once into one sandbox (a coordinator's threads share their
// parent's), with and without the guest's durable op records, in one
// interleaved run: where group commit of those records pays. It reports
// the time per call of each and their ratio.
//
//	go test -run '^$' -bench ToolJournalConcurrent -benchtime 200x ./internal/session/
func BenchmarkToolJournalConcurrent(b *testing.B) {
	const callers = 4
	d := daemontest.Start(b)
	ctx := context.Background()
	sb, err := d.Sandboxes().Create(ctx, sandbox.CreateParams{TenantID: "t1"})
	if err != nil {
		b.Fatal(err)
	}
	input := json.RawMessage(`{"command":"echo x"}`)
	round := func(i int, journalled bool) time.Duration {
		t0 := time.Now()
		var wg sync.WaitGroup
		for c := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				opID := ""
				if journalled {
					id, err := journal.OpID(journal.KindToolExec, map[string]any{"name": "bash", "input": input,
						"caller": fmt.Sprint(c)}, 1, int64(i), 0)
					if err != nil {
						b.Error(err)
						return
					}
					opID = id
				}
				if _, err := tools.Run(ctx, d.Sandboxes(), "t1", sb.ID, "bash", input, tools.Limits{}, opID); err != nil {
					b.Error(err)
				}
			}()
		}
		wg.Wait()
		return time.Since(t0)
	}
	round(-1, false) // warm the shell
	var without, with time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		without += round(i, false)
		with += round(i, true)
	}
	b.StopTimer()
	b.ReportMetric(float64(without.Microseconds())/float64(b.N*callers), "µs/call-plain")
	b.ReportMetric(float64(with.Microseconds())/float64(b.N*callers), "µs/call-journalled")
	b.ReportMetric(float64(with)/float64(without), "ratio")
}
