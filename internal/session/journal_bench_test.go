package session_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// BenchmarkToolJournalOverhead measures, in one run, one bash tool call in
// a real sandbox (process driver) without the op journal and with it: the
// op_started and op_completed rows in the store (SQLite) and the guest's
// durable accepted/result records. It reports the ratio with/without.
//
//	go test -run '^$' -bench ToolJournalOverhead -benchtime 300x ./internal/session/
func BenchmarkToolJournalOverhead(b *testing.B) {
	d := daemontest.Start(b)
	ctx := context.Background()
	st := d.Store()
	a, err := st.CreateAgent(ctx, &store.Agent{TenantID: "t1", Doc: json.RawMessage(`{"model":{"id":"m"}}`)})
	if err != nil {
		b.Fatal(err)
	}
	s, err := st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: "t1", AgentID: a.ID, AgentVersion: a.Version, Doc: json.RawMessage(`{}`)})
	if err != nil {
		b.Fatal(err)
	}
	sb, err := d.Sandboxes().Create(ctx, sandbox.CreateParams{TenantID: "t1"})
	if err != nil {
		b.Fatal(err)
	}
	input := json.RawMessage(`{"command":"echo x"}`)
	plain := func() {
		if _, err := tools.Run(ctx, d.Sandboxes(), "t1", sb.ID, "bash", input, tools.Limits{}, ""); err != nil {
			b.Fatal(err)
		}
	}
	journalled := func(i int, guestRecord bool) {
		id, err := journal.OpID(journal.KindToolExec, map[string]any{"name": "bash", "input": input}, 1, int64(i), 0)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := st.StartOp(ctx, &store.Op{ID: id, SessionID: s.ID, Kind: journal.KindToolExec, TurnSeq: 1, Step: int64(i),
			Args: input, Status: store.OpStarted, StartedAt: time.Now()}); err != nil {
			b.Fatal(err)
		}
		guestID := ""
		if guestRecord {
			guestID = id
		}
		res, err := tools.Run(ctx, d.Sandboxes(), "t1", sb.ID, "bash", input, tools.Limits{}, guestID)
		if err != nil {
			b.Fatal(err)
		}
		raw, _ := json.Marshal(res)
		if _, err := st.CompleteOp(ctx, s.ID, id, raw); err != nil {
			b.Fatal(err)
		}
	}
	plain() // warm the shell
	var without, with, storeOnly time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Interleaved, so drift in the machine's load hits all alike.
		t0 := time.Now()
		plain()
		t1 := time.Now()
		journalled(2*i, true)
		t2 := time.Now()
		journalled(2*i+1, false)
		without += t1.Sub(t0)
		with += t2.Sub(t1)
		storeOnly += time.Since(t2)
	}
	b.StopTimer()
	// The store's half of the journal alone (op rows, no guest record):
	// the rest of the overhead is the guest's fsynced op records.
	b.ReportMetric(float64(storeOnly)/float64(without), "ratio-store-only")
	b.ReportMetric(float64(without.Microseconds())/float64(b.N), "µs/call-plain")
	b.ReportMetric(float64(with.Microseconds())/float64(b.N), "µs/call-journalled")
	b.ReportMetric(float64(with)/float64(without), "ratio")
}
