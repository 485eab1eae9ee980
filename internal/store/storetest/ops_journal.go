package storetest

import (
	"encoding/json"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var opJournalCases = []opCase{
	{"StartAndGet", testOpStartAndGet},
	{"StartAlwaysStarted", testOpStartAlwaysStarted},
	{"StartExistingReturnsStoredOp", testOpStartExisting},
	{"StartInvalid", testOpStartInvalid},
	{"SameIDInTwoSessions", testOpSameIDTwoSessions},
	{"Complete", testOpComplete},
	{"CompleteTwiceKeepsFirstResult", testOpCompleteTwice},
	{"CompleteUnknownOrInvalid", testOpCompleteBad},
	{"ListInPositionOrder", testOpList},
}

// opFull has every field StartOp keeps set to a non-zero value.
func opFull(id string) store.Op {
	return store.Op{
		ID: id, SessionID: "sesn_ops", Kind: "tool_exec", TurnSeq: 3, Step: 2, Index: 1,
		Args: json.RawMessage(`{"command":"echo x >> /workspace/log","timeout_ms":5000}`), StartedAt: opAt(0),
	}
}

func testOpStartAndGet(e *opEnv) {
	in := opFull(opID(1))
	want := in
	want.Status = store.OpStarted
	opSame(e.t, "StartOp", e.start(in), &want)
	opSame(e.t, "GetOp", e.get(in.SessionID, in.ID), &want)

	// Zero StartedAt is the store's now; no Args is stored as none.
	before := time.Now().Add(-time.Minute)
	op := e.start(store.Op{ID: opID(2), SessionID: "sesn_ops", Kind: "model_request"})
	if op.StartedAt.Before(before) || len(op.Args) != 0 {
		e.t.Fatalf("StartOp with zero StartedAt and no Args: StartedAt %v, Args %s", op.StartedAt, op.Args)
	}

	_, err := e.s.GetOp(e.ctx, "sesn_ops", opID(3))
	mustErrIs(e.t, err, store.ErrNotFound, "GetOp of an unknown op")
}

// testOpStartAlwaysStarted: a caller cannot start an op as completed.
func testOpStartAlwaysStarted(e *opEnv) {
	in := opFull(opID(1))
	in.Status, in.Result, in.CompletedAt = store.OpCompleted, json.RawMessage(`{"exit_code":0}`), ptr(opAt(time.Second))
	op := e.start(in)
	equal(e.t, "Status", op.Status, store.OpStarted)
	if len(op.Result) != 0 || op.CompletedAt != nil {
		e.t.Fatalf("started op has Result %s, CompletedAt %v; want none", op.Result, op.CompletedAt)
	}
}

// testOpStartExisting: a replayed StartOp learns what the journal holds,
// first as started, then with the recorded result.
func testOpStartExisting(e *opEnv) {
	first := e.start(opFull(opID(1)))
	replay := opFull(opID(1))
	replay.Args, replay.Kind, replay.StartedAt = json.RawMessage(`{"command":"other"}`), "model_request", opAt(time.Hour)

	got, err := e.s.StartOp(e.ctx, &replay)
	mustErrIs(e.t, err, store.ErrAlreadyExists, "StartOp of an existing op")
	if got == nil {
		e.t.Fatal("StartOp of an existing op returned no op")
	}
	opSame(e.t, "existing op", got, first)

	done, err := e.s.CompleteOp(e.ctx, first.SessionID, first.ID, json.RawMessage(`{"exit_code":0,"stdout":"x"}`))
	mustOK(e.t, err, "CompleteOp")
	got, err = e.s.StartOp(e.ctx, &replay)
	mustErrIs(e.t, err, store.ErrAlreadyExists, "StartOp of a completed op")
	opSame(e.t, "completed op returned by StartOp", got, done)
}

func testOpStartInvalid(e *opEnv) {
	for name, mod := range map[string]func(*store.Op){
		"no ID":          func(op *store.Op) { op.ID = "" },
		"no SessionID":   func(op *store.Op) { op.SessionID = "" },
		"no Kind":        func(op *store.Op) { op.Kind = "" },
		"negative turn":  func(op *store.Op) { op.TurnSeq = -1 },
		"negative step":  func(op *store.Op) { op.Step = -1 },
		"negative index": func(op *store.Op) { op.Index = -1 },
		"bad Args JSON":  func(op *store.Op) { op.Args = json.RawMessage(`{"a":`) },
	} {
		op := opFull(opID(1))
		mod(&op)
		_, err := e.s.StartOp(e.ctx, &op)
		mustErrIs(e.t, err, store.ErrInvalid, "StartOp with "+name)
	}
	sbEqualIDs(e.t, "ops after invalid starts", e.listIDs("sesn_ops", 0))
}

// testOpSameIDTwoSessions: ops are keyed by (session, id).
func testOpSameIDTwoSessions(e *opEnv) {
	a := opFull(opID(1))
	b := a
	b.SessionID, b.Kind = "sesn_other", "outbound_call"
	e.start(a)
	e.start(b)
	_, err := e.s.CompleteOp(e.ctx, a.SessionID, a.ID, json.RawMessage(`"a"`))
	mustOK(e.t, err, "CompleteOp in session a")
	equal(e.t, "op in session b", e.get(b.SessionID, b.ID).Status, store.OpStarted)
	equal(e.t, "op in session b Kind", e.get(b.SessionID, b.ID).Kind, "outbound_call")
}

func testOpComplete(e *opEnv) {
	started := e.start(opFull(opID(1)))
	before := time.Now().Add(-time.Minute)
	result := json.RawMessage(`{"exit_code":0,"stdout":"x\n","truncated":false}`)
	done, err := e.s.CompleteOp(e.ctx, started.SessionID, started.ID, result)
	mustOK(e.t, err, "CompleteOp")
	if done.CompletedAt == nil || done.CompletedAt.Before(before) {
		e.t.Fatalf("CompletedAt = %v, want the store's now", done.CompletedAt)
	}
	want := *started
	want.Status, want.Result, want.CompletedAt = store.OpCompleted, result, done.CompletedAt
	opSame(e.t, "CompleteOp", done, &want)
	opSame(e.t, "GetOp after CompleteOp", e.get(started.SessionID, started.ID), &want)
}

func testOpCompleteTwice(e *opEnv) {
	op := e.start(opFull(opID(1)))
	first, err := e.s.CompleteOp(e.ctx, op.SessionID, op.ID, json.RawMessage(`{"n":1}`))
	mustOK(e.t, err, "first CompleteOp")
	got, err := e.s.CompleteOp(e.ctx, op.SessionID, op.ID, json.RawMessage(`{"n":2}`))
	mustErrIs(e.t, err, store.ErrConflict, "second CompleteOp")
	if got == nil {
		e.t.Fatal("second CompleteOp returned no op")
	}
	opSame(e.t, "op returned by the second CompleteOp", got, first)
	opSame(e.t, "GetOp after two completions", e.get(op.SessionID, op.ID), first)
}

func testOpCompleteBad(e *opEnv) {
	_, err := e.s.CompleteOp(e.ctx, "sesn_ops", opID(9), json.RawMessage(`{}`))
	mustErrIs(e.t, err, store.ErrNotFound, "CompleteOp of an unknown op")
	op := e.start(opFull(opID(1)))
	_, err = e.s.CompleteOp(e.ctx, "sesn_other", op.ID, json.RawMessage(`{}`))
	mustErrIs(e.t, err, store.ErrNotFound, "CompleteOp in the wrong session")
	_, err = e.s.CompleteOp(e.ctx, op.SessionID, op.ID, json.RawMessage(`{"a":`))
	mustErrIs(e.t, err, store.ErrInvalid, "CompleteOp with bad JSON")
	equal(e.t, "Status after a refused completion", e.get(op.SessionID, op.ID).Status, store.OpStarted)
	// No result at all is a valid completion (the call returned nothing).
	done, err := e.s.CompleteOp(e.ctx, op.SessionID, op.ID, nil)
	mustOK(e.t, err, "CompleteOp without a result")
	equal(e.t, "Status", done.Status, store.OpCompleted)
}

// testOpList: ops come back in (turn, step, index) order whatever order
// they were started in, filtered by turn when one is given.
func testOpList(e *opEnv) {
	positions := []struct {
		id                int
		turn, step, index int64
	}{
		// Neither id order nor start order is position order.
		{5, 2, 1, 0}, {8, 1, 0, 0}, {7, 2, 0, 1}, {6, 1, 1, 1}, {4, 10, 0, 0},
		{3, 1, 1, 0}, {1, 2, 0, 0}, {2, 2, 0, 2},
	}
	for _, p := range positions {
		e.start(store.Op{ID: opID(p.id), SessionID: "sesn_ops", Kind: "tool_exec",
			TurnSeq: p.turn, Step: p.step, Index: p.index})
	}
	e.start(store.Op{ID: opID(99), SessionID: "sesn_other", Kind: "tool_exec", TurnSeq: 1})
	sbEqualIDs(e.t, "all ops", e.listIDs("sesn_ops", 0),
		opID(8), opID(3), opID(6), opID(1), opID(7), opID(2), opID(5), opID(4))
	sbEqualIDs(e.t, "turn 2", e.listIDs("sesn_ops", 2), opID(1), opID(7), opID(2), opID(5))
	sbEqualIDs(e.t, "turn 10", e.listIDs("sesn_ops", 10), opID(4))
	sbEqualIDs(e.t, "a turn without ops", e.listIDs("sesn_ops", 3))
	sbEqualIDs(e.t, "a session without ops", e.listIDs("sesn_none", 0))
	if ops, err := e.s.ListOps(e.ctx, "sesn_none", 0); err != nil || ops == nil {
		e.t.Fatalf("ListOps of a session without ops = %v, %v; want an empty slice", ops, err)
	}
}
