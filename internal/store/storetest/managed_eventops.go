package storetest

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Op journal writes that travel with events (store.EventOp): an
// agent.tool_use stores its op_started and an agent.tool_result its
// op_completed in the transaction that stores the event, whichever write
// that is; a write that fails stores neither.
var mgEventOpCases = []mgCase{
	{"StartAndCompleteWithEvents", testEvOpStartComplete},
	{"FailedWriteStoresNeither", testEvOpFailedWrite},
	{"Invalid", testEvOpInvalid},
	{"Batch", testEvOpBatch},
	{"CommitStepAndEndTurn", testEvOpCommitStep},
}

// evOpStart is a tool_exec op of turn 1, step 1 at index n.
func evOpStart(n int) *store.EventOp {
	return &store.EventOp{Start: &store.Op{ID: opID(n), Kind: "tool_exec", TurnSeq: 1, Step: 1, Index: int64(n),
		Args: json.RawMessage(fmt.Sprintf(`{"n":%d}`, n)), StartedAt: opAt(0)}}
}

func evOpDone(n int, result string) *store.EventOp {
	return &store.EventOp{Complete: &store.OpCompletion{ID: opID(n), Result: json.RawMessage(result)}}
}

// evOp is one event of type typ carrying op.
func evOp(typ string, op *store.EventOp) store.NewEvent {
	return store.NewEvent{Type: typ, Data: json.RawMessage(fmt.Sprintf(`{"type":%q}`, typ)), Op: op}
}

func (e *mgEnv) getOp(sessionID string, n int) *store.Op {
	e.t.Helper()
	op, err := e.s.GetOp(e.ctx, sessionID, opID(n))
	mustOK(e.t, err, fmt.Sprintf("GetOp(%s)", opID(n)))
	return op
}

func (e *mgEnv) noOp(sessionID string, n int, what string) {
	e.t.Helper()
	_, err := e.s.GetOp(e.ctx, sessionID, opID(n))
	mustErrIs(e.t, err, store.ErrNotFound, what)
}

func testEvOpStartComplete(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_evop"})
	evs, err := e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{evOp("agent.tool_use", evOpStart(1))})
	mustOK(e.t, err, "AppendEvents with op_started")
	mgEqualSeqs(e.t, "tool_use", evs, 1)
	op := e.getOp(s.ID, 1)
	equal(e.t, "Status", op.Status, store.OpStarted)
	equal(e.t, "SessionID", op.SessionID, s.ID)
	equal(e.t, "Kind", op.Kind, "tool_exec")
	equal(e.t, "position", [3]int64{op.TurnSeq, op.Step, op.Index}, [3]int64{1, 1, 1})
	equal(e.t, "Args", string(op.Args), `{"n":1}`)
	equal(e.t, "StartedAt", op.StartedAt.Equal(opAt(0)), true)

	// Starting it again: refused whole, the op as it was.
	_, err = e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{evOp("agent.tool_use", evOpStart(1))})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "op_started of an op in the journal")
	equal(e.t, "events after the refused start", e.lastSeq(s.ID), int64(1))

	evs, err = e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{evOp("agent.tool_result", evOpDone(1, `{"content":"x"}`))})
	mustOK(e.t, err, "AppendEvents with op_completed")
	mgEqualSeqs(e.t, "tool_result", evs, 2)
	op = e.getOp(s.ID, 1)
	equal(e.t, "Status", op.Status, store.OpCompleted)
	equal(e.t, "Result", string(op.Result), `{"content":"x"}`)
	if op.CompletedAt == nil {
		e.t.Fatal("CompletedAt is nil after op_completed")
	}

	// A second completion keeps the first result, and the event is stored.
	_, err = e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{evOp("agent.tool_result", evOpDone(1, `{"content":"y"}`))})
	mustOK(e.t, err, "AppendEvents with a second op_completed")
	equal(e.t, "Result after a second completion", string(e.getOp(s.ID, 1).Result), `{"content":"x"}`)
	equal(e.t, "events", e.lastSeq(s.ID), int64(3))
}

func testEvOpFailedWrite(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_evop_fail"})
	// The second event completes an op that is not in the journal: the
	// first event's op_started and both events are rolled back.
	_, err := e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{
		evOp("agent.tool_use", evOpStart(2)), evOp("agent.tool_result", evOpDone(3, `{}`))})
	mustErrIs(e.t, err, store.ErrNotFound, "op_completed of an op not in the journal")
	equal(e.t, "events after the failed write", e.lastSeq(s.ID), int64(0))
	e.noOp(s.ID, 2, "op started by a failed write")

	// An event the store refuses takes its op with it.
	_, err = e.s.AppendEvents(e.ctx, "sesn_missing", []store.NewEvent{evOp("agent.tool_use", evOpStart(4))})
	mustErrIs(e.t, err, store.ErrNotFound, "append to an unknown session")
	e.noOp("sesn_missing", 4, "op started with an event of an unknown session")
	first := e.appendTypes(s.ID, "user.message")
	_, err = e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{{ID: first[0].ID, Type: "agent.tool_use", Op: evOpStart(5)}})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "append of a stored event id")
	e.noOp(s.ID, 5, "op started with a refused event")

	// And a completion with a refused event leaves the op started.
	_, err = e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{evOp("agent.tool_use", evOpStart(6))})
	mustOK(e.t, err, "AppendEvents with op_started")
	_, err = e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{{ID: first[0].ID, Type: "agent.tool_result", Op: evOpDone(6, `{}`)}})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "append of a stored event id")
	equal(e.t, "Status after a refused completion", e.getOp(s.ID, 6).Status, store.OpStarted)
}

func testEvOpInvalid(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_evop_bad"})
	for what, op := range map[string]*store.EventOp{
		"neither start nor complete": {},
		"both start and complete":    {Start: evOpStart(7).Start, Complete: evOpDone(7, `{}`).Complete},
		"start of another session": {Start: &store.Op{ID: opID(7), SessionID: "sesn_other", Kind: "tool_exec",
			TurnSeq: 1, Step: 1}},
		"start without a kind":       {Start: &store.Op{ID: opID(7), TurnSeq: 1, Step: 1}},
		"completion without an op":   {Complete: &store.OpCompletion{Result: json.RawMessage(`{}`)}},
		"completion with bad result": {Complete: &store.OpCompletion{ID: opID(7), Result: json.RawMessage(`{`)}},
	} {
		_, err := e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{evOp("agent.tool_use", op)})
		mustErrIs(e.t, err, store.ErrInvalid, what)
	}
	equal(e.t, "events after invalid writes", e.lastSeq(s.ID), int64(0))
	e.noOp(s.ID, 7, "op of an invalid write")
	e.noOp("sesn_other", 7, "op of an invalid write, other session")
}

func testEvOpBatch(e *mgEnv) {
	a := e.session(store.ManagedSession{ID: "sesn_evop_a"})
	b := e.session(store.ManagedSession{ID: "sesn_evop_b"})
	_, err := e.s.AppendEventsBatch(e.ctx, map[string][]store.NewEvent{
		a.ID: {evOp("agent.tool_use", evOpStart(1))},
		b.ID: {evOp("agent.tool_use", evOpStart(1)), evOp("agent.tool_use", evOpStart(2))},
	})
	mustOK(e.t, err, "AppendEventsBatch with ops")
	equal(e.t, "a's op", e.getOp(a.ID, 1).Status, store.OpStarted)
	equal(e.t, "b's op 1", e.getOp(b.ID, 1).Status, store.OpStarted)
	equal(e.t, "b's op 2", e.getOp(b.ID, 2).Index, int64(2))

	// One session's failing op write fails the whole batch.
	_, err = e.s.AppendEventsBatch(e.ctx, map[string][]store.NewEvent{
		a.ID: {evOp("agent.tool_result", evOpDone(1, `{"ok":true}`))},
		b.ID: {evOp("agent.tool_result", evOpDone(9, `{}`))},
	})
	if !errors.Is(err, store.ErrNotFound) {
		e.t.Fatalf("AppendEventsBatch completing an unknown op: %v, want ErrNotFound", err)
	}
	equal(e.t, "a's op after the failed batch", e.getOp(a.ID, 1).Status, store.OpStarted)
	equal(e.t, "a's events after the failed batch", e.lastSeq(a.ID), int64(1))
	equal(e.t, "b's events after the failed batch", e.lastSeq(b.ID), int64(2))

	_, err = e.s.AppendEventsBatch(e.ctx, map[string][]store.NewEvent{
		a.ID: {evOp("agent.tool_result", evOpDone(1, `{"ok":true}`))},
		b.ID: {evOp("agent.tool_result", evOpDone(2, `{"ok":2}`))},
	})
	mustOK(e.t, err, "AppendEventsBatch completing ops")
	equal(e.t, "a's result", string(e.getOp(a.ID, 1).Result), `{"ok":true}`)
	equal(e.t, "b's op 1 untouched", e.getOp(b.ID, 1).Status, store.OpStarted)
	equal(e.t, "b's result", string(e.getOp(b.ID, 2).Result), `{"ok":2}`)
}

func testEvOpCommitStep(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_evop_step"})
	e.brTurn(s.ID)
	_, err := e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{
		evOp("agent.tool_use", evOpStart(1)), evOp("agent.tool_use", evOpStart(2))})
	mustOK(e.t, err, "AppendEvents with op_started")

	// Refused (not the run's owner): the op stays started.
	_, _, err = e.s.CommitStep(e.ctx, store.StepCommit{SessionID: s.ID, Owner: "node-b/boot", Step: 1,
		Events: []store.NewEvent{evOp("agent.tool_result", evOpDone(1, `{"r":1}`))}})
	mustErrIs(e.t, err, store.ErrConflict, "CommitStep by another owner")
	equal(e.t, "Status after the refused step", e.getOp(s.ID, 1).Status, store.OpStarted)

	evs, cp, err := e.s.CommitStep(e.ctx, store.StepCommit{SessionID: s.ID, Owner: brOwner, Step: 1,
		Events: []store.NewEvent{evOp("agent.tool_result", evOpDone(1, `{"r":1}`))}, Workspace: "wsnap_1"})
	mustOK(e.t, err, "CommitStep with op_completed")
	equal(e.t, "checkpoint MessageCount", cp.MessageCount, evs[0].Seq)
	equal(e.t, "result", string(e.getOp(s.ID, 1).Result), `{"r":1}`)

	// A step naming an op not in the journal stores nothing.
	_, _, err = e.s.CommitStep(e.ctx, store.StepCommit{SessionID: s.ID, Owner: brOwner, Step: 2,
		Events: []store.NewEvent{evOp("agent.tool_result", evOpDone(8, `{}`))}})
	mustErrIs(e.t, err, store.ErrNotFound, "CommitStep completing an unknown op")
	latest, err := e.s.GetLatestCheckpoint(e.ctx, s.ID)
	mustOK(e.t, err, "GetLatestCheckpoint")
	equal(e.t, "latest checkpoint after the failed step", latest.ID, cp.ID)

	_, _, err = e.s.EndTurn(e.ctx, store.EndTurn{SessionID: s.ID, Owner: brOwner, Status: store.RunCompleted, Step: 2,
		Events: []store.NewEvent{evOp("agent.tool_result", evOpDone(2, `{"r":2}`)), evOp("session.status_idle", nil)}})
	mustOK(e.t, err, "EndTurn with op_completed")
	equal(e.t, "result with the turn's end", string(e.getOp(s.ID, 2).Result), `{"r":2}`)
}
