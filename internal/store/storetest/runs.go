package storetest

import (
	"github.com/agentkernel/agentkernel/internal/store"
)

var runCases = []testCase{
	{"Lifecycle", testRuns},
	{"BadPaths", testRunBadPaths},
}

func testRuns(e *env) {
	s0 := e.session()
	r1, err := e.s.CreateRun(e.ctx, store.CreateRunParams{SessionID: s0.ID, StartSequence: 10,
		Metadata: []byte(`{"turn":1}`)})
	mustOK(e.t, err, "CreateRun")
	if r1.ID == "" || r1.Status != store.RunRunning || r1.Seq != 1 || r1.StartSequence != 10 || r1.CompletedAt != nil {
		e.t.Fatalf("first run: %+v", r1)
	}
	jsonEq(e.t, "run metadata", r1.Metadata, `{"turn":1}`)
	r2, err := e.s.CreateRun(e.ctx, store.CreateRunParams{ID: "run_second", SessionID: s0.ID, StartSequence: 20})
	mustOK(e.t, err, "CreateRun with id")
	equal(e.t, "second run id", r2.ID, "run_second")
	equal(e.t, "second run seq", r2.Seq, 2)

	cur, err := e.s.GetCurrentRun(e.ctx, s0.ID)
	mustOK(e.t, err, "GetCurrentRun")
	equal(e.t, "current run", cur.ID, r2.ID)

	up, err := e.s.UpdateRunStatus(e.ctx, store.UpdateRunStatusParams{RunID: r1.ID, Status: store.RunFailed, Error: "tool crashed"})
	mustOK(e.t, err, "UpdateRunStatus")
	if up.Status != store.RunFailed || up.Error != "tool crashed" || up.CompletedAt == nil {
		e.t.Fatalf("failed run: %+v", up)
	}
	sus, err := e.s.UpdateRunStatus(e.ctx, store.UpdateRunStatusParams{RunID: r2.ID, Status: store.RunSuspendedClientTool})
	mustOK(e.t, err, "UpdateRunStatus suspended")
	equal(e.t, "suspended status", sus.Status, store.RunSuspendedClientTool)

	got, err := e.s.GetRun(e.ctx, r1.ID)
	mustOK(e.t, err, "GetRun")
	if got.Status != store.RunFailed || got.Error != "tool crashed" || got.SessionID != s0.ID || got.CompletedAt == nil {
		e.t.Fatalf("GetRun after update: %+v", got)
	}
	list, err := e.s.ListRuns(e.ctx, s0.ID)
	mustOK(e.t, err, "ListRuns")
	if len(list) != 2 || list[0].ID != r1.ID || list[1].ID != r2.ID {
		e.t.Fatalf("ListRuns: got %d runs %v", len(list), list)
	}

	// Every turn writes a run: the list grows by one per CreateRun.
	_, err = e.s.CreateRun(e.ctx, store.CreateRunParams{SessionID: s0.ID})
	mustOK(e.t, err, "third CreateRun")
	list, _ = e.s.ListRuns(e.ctx, s0.ID)
	equal(e.t, "runs after third turn", len(list), 3)
	equal(e.t, "third run seq", list[2].Seq, 3)

	fresh := e.session()
	list, err = e.s.ListRuns(e.ctx, fresh.ID)
	mustOK(e.t, err, "ListRuns(no runs)")
	equal(e.t, "runs of a fresh session", len(list), 0)
	_, err = e.s.GetCurrentRun(e.ctx, fresh.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetCurrentRun(no runs)")
}

func testRunBadPaths(e *env) {
	s0 := e.session()
	_, err := e.s.CreateRun(e.ctx, store.CreateRunParams{ID: "run_dup", SessionID: s0.ID})
	mustOK(e.t, err, "CreateRun")
	_, err = e.s.CreateRun(e.ctx, store.CreateRunParams{ID: "run_dup", SessionID: s0.ID})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "duplicate CreateRun")
	_, err = e.s.CreateRun(e.ctx, store.CreateRunParams{SessionID: "sesn_missing"})
	mustErrIs(e.t, err, store.ErrNotFound, "CreateRun(unknown session)")
	_, err = e.s.UpdateRunStatus(e.ctx, store.UpdateRunStatusParams{RunID: "run_dup", Status: "exploded"})
	mustErrIs(e.t, err, store.ErrInvalid, "UpdateRunStatus with unknown status")
	_, err = e.s.UpdateRunStatus(e.ctx, store.UpdateRunStatusParams{RunID: "run_missing", Status: store.RunCompleted})
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateRunStatus(unknown)")
	_, err = e.s.GetRun(e.ctx, "run_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetRun(unknown)")
	_, err = e.s.GetCurrentRun(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetCurrentRun(unknown)")
	_, err = e.s.ListRuns(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "ListRuns(unknown)")
}
