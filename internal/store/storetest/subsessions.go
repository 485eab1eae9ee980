package storetest

import (
	"github.com/agentkernel/agentkernel/internal/store"
)

var subSessionCases = []testCase{
	{"AddUpdateList", testSubSessionRefs},
}

func testSubSessionRefs(e *env) {
	parent := e.session()
	refs := []store.SubSessionRef{
		{SessionID: parent.ID, SubSessionID: "child_1", AgentType: "researcher", ParentToolCallID: "call_1", Status: "running"},
		{SessionID: parent.ID, SubSessionID: "child_2", AgentType: "coder", ParentToolCallID: "call_2", Status: "running"},
	}
	mustOK(e.t, e.s.AddSubSessionRefs(e.ctx, refs), "AddSubSessionRefs")
	mustOK(e.t, e.s.UpdateSubSessionRef(e.ctx, store.UpdateSubSessionRefParams{SessionID: parent.ID,
		SubSessionID: "child_2", Status: "completed", Result: []byte(`{"answer":42}`)}), "UpdateSubSessionRef")

	got, err := e.s.ListSubSessionRefs(e.ctx, parent.ID)
	mustOK(e.t, err, "ListSubSessionRefs")
	if len(got) != 2 || got[0].SubSessionID != "child_1" || got[1].SubSessionID != "child_2" {
		e.t.Fatalf("refs: %+v", got)
	}
	r1, r2 := got[0], got[1]
	if r1.AgentType != "researcher" || r1.ParentToolCallID != "call_1" || r1.Status != "running" || r1.SessionID != parent.ID {
		e.t.Fatalf("first ref: %+v", r1)
	}
	equal(e.t, "updated status", r2.Status, "completed")
	jsonEq(e.t, "updated result", r2.Result, `{"answer":42}`)
	if r1.CreatedAt.IsZero() || r2.UpdatedAt.Before(r2.CreatedAt) {
		e.t.Fatalf("ref timestamps: %+v", r2)
	}

	// A batch with a duplicate adds nothing.
	err = e.s.AddSubSessionRefs(e.ctx, []store.SubSessionRef{
		{SessionID: parent.ID, SubSessionID: "child_3"},
		{SessionID: parent.ID, SubSessionID: "child_1"},
	})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "AddSubSessionRefs with a duplicate")
	got, _ = e.s.ListSubSessionRefs(e.ctx, parent.ID)
	equal(e.t, "refs after the rejected batch", len(got), 2)

	mustErrIs(e.t, e.s.AddSubSessionRefs(e.ctx, []store.SubSessionRef{{SessionID: "sesn_missing", SubSessionID: "c"}}),
		store.ErrNotFound, "AddSubSessionRefs(unknown parent)")
	mustErrIs(e.t, e.s.UpdateSubSessionRef(e.ctx, store.UpdateSubSessionRefParams{SessionID: parent.ID,
		SubSessionID: "child_missing", Status: "completed"}), store.ErrNotFound, "UpdateSubSessionRef(unknown)")
	_, err = e.s.ListSubSessionRefs(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "ListSubSessionRefs(unknown)")
	empty := e.session()
	got, err = e.s.ListSubSessionRefs(e.ctx, empty.ID)
	mustOK(e.t, err, "ListSubSessionRefs(none)")
	equal(e.t, "refs of a session without children", len(got), 0)
}
