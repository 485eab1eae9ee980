package session_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
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

// BenchmarkToolCallJournal measures, in one interleaved run, one bash tool
// call as a turn writes it — its agent.tool_use event, the call in a real
// sandbox (process driver), its agent.tool_result event (SQLite, through
// the event log) — three ways: without the op journal; journalled as
// turns do it now (op_started stored with the tool_use, op_completed with
// the tool_result, the guest's durable records); and journalled as they
// did before (op_started and op_completed in transactions of their own).
//
//	go test -run '^$' -bench ToolCallJournal -benchtime 300x ./internal/session/
func BenchmarkToolCallJournal(b *testing.B) {
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
	events := session.NewEventLog(st, session.EventLogConfig{})
	defer events.Close()
	input := json.RawMessage(`{"command":"echo x"}`)
	use := json.RawMessage(`{"type":"agent.tool_use","name":"bash","input":{"command":"echo x"},"evaluated_permission":"allow"}`)
	appendEv := func(ev store.NewEvent) {
		if _, err := events.Append(ctx, s.ID, []store.NewEvent{ev}); err != nil {
			b.Fatal(err)
		}
	}
	result := func(res *guest.ToolResult, op *store.EventOp) store.NewEvent {
		data, _ := json.Marshal(map[string]any{"type": "agent.tool_result", "content": []map[string]any{{"type": "text", "text": res.Content}}})
		return store.NewEvent{Type: "agent.tool_result", Data: data, Op: op}
	}
	run := func(opID string) *guest.ToolResult {
		res, err := tools.Run(ctx, d.Sandboxes(), "t1", sb.ID, "bash", input, tools.Limits{}, opID)
		if err != nil {
			b.Fatal(err)
		}
		return res
	}
	op := func(i int) (string, *store.Op) {
		id, err := journal.OpID(journal.KindToolExec, map[string]any{"name": "bash", "input": input}, 1, int64(i), 0)
		if err != nil {
			b.Fatal(err)
		}
		return id, &store.Op{ID: id, SessionID: s.ID, Kind: journal.KindToolExec, TurnSeq: 1, Step: int64(i),
			Args: input, Status: store.OpStarted, StartedAt: time.Now()}
	}
	plain := func() {
		appendEv(store.NewEvent{Type: "agent.tool_use", Data: use})
		appendEv(result(run(""), nil))
	}
	folded := func(i int) {
		id, o := op(i)
		appendEv(store.NewEvent{Type: "agent.tool_use", Data: use, Op: &store.EventOp{Start: o}})
		res := run(id)
		raw, _ := json.Marshal(res)
		appendEv(result(res, &store.EventOp{Complete: &store.OpCompletion{ID: id, Result: raw}}))
	}
	separate := func(i int) {
		id, o := op(i)
		appendEv(store.NewEvent{Type: "agent.tool_use", Data: use})
		if _, err := st.StartOp(ctx, o); err != nil {
			b.Fatal(err)
		}
		res := run(id)
		raw, _ := json.Marshal(res)
		if _, err := st.CompleteOp(ctx, s.ID, id, raw); err != nil {
			b.Fatal(err)
		}
		appendEv(result(res, nil))
	}
	plain() // warm the shell
	var without, with, before time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		// Interleaved, so drift in the machine's load hits all alike.
		t0 := time.Now()
		plain()
		t1 := time.Now()
		folded(2 * i)
		t2 := time.Now()
		separate(2*i + 1)
		without += t1.Sub(t0)
		with += t2.Sub(t1)
		before += time.Since(t2)
	}
	b.StopTimer()
	b.ReportMetric(float64(without.Microseconds())/float64(b.N), "µs/call-plain")
	b.ReportMetric(float64(with.Microseconds())/float64(b.N), "µs/call-journalled")
	b.ReportMetric(float64(before.Microseconds())/float64(b.N), "µs/call-separate-op-txs")
	b.ReportMetric(float64(with)/float64(without), "ratio")
	b.ReportMetric(float64(before)/float64(without), "ratio-separate-op-txs")
}
