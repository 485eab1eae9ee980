package storetest

import (
	"fmt"
	"reflect"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var lifecycleCases = []testCase{
	{"DeleteSessionRemovesEverything", testDeleteSession},
	{"DeleteExpiredSessions", testDeleteExpired},
	{"ListSessionsPages", testListSessions},
	{"Clone", testClone},
	{"BranchFromCheckpoint", testBranch},
}

// populate gives a session one of everything it owns.
func populate(e *env, id string) {
	e.t.Helper()
	e.sessionWith(store.CreateSessionParams{ID: id})
	e.appendMsgs(id, "a", "b")
	_, err := e.s.CreateRun(e.ctx, store.CreateRunParams{ID: "run_" + id, SessionID: id})
	mustOK(e.t, err, "CreateRun")
	_, err = e.s.CreateCheckpoint(e.ctx, id, store.CheckpointMeta{ID: "cp_" + id})
	mustOK(e.t, err, "CreateCheckpoint")
	stage(e, id, "step", `{"a":1}`, "staged")
	mustOK(e.t, e.s.AddSubSessionRefs(e.ctx, []store.SubSessionRef{{SessionID: id, SubSessionID: "child_" + id}}), "AddSubSessionRefs")
	mustOK(e.t, e.s.SetInterruptFlag(e.ctx, id, "x"), "SetInterruptFlag")
}

// assertGone checks that nothing of id is left, including after re-creating
// a session with the same id (which would expose orphaned child rows).
func assertGone(e *env, id string) {
	e.t.Helper()
	_, err := e.s.GetSession(e.ctx, id)
	mustErrIs(e.t, err, store.ErrNotFound, "GetSession after delete")
	_, err = e.s.GetRun(e.ctx, "run_"+id)
	mustErrIs(e.t, err, store.ErrNotFound, "GetRun after delete")
	_, err = e.s.GetCheckpoint(e.ctx, id, "cp_"+id)
	mustErrIs(e.t, err, store.ErrNotFound, "GetCheckpoint after delete")
	_, err = e.s.GetMessages(e.ctx, store.GetMessagesParams{SessionID: id})
	mustErrIs(e.t, err, store.ErrNotFound, "GetMessages after delete")

	e.sessionWith(store.CreateSessionParams{ID: id})
	n, err := e.s.CountMessages(e.ctx, id)
	mustOK(e.t, err, "CountMessages of the re-created session")
	equal(e.t, "messages of the re-created session", n, 0)
	runs, err := e.s.ListRuns(e.ctx, id)
	mustOK(e.t, err, "ListRuns of the re-created session")
	equal(e.t, "runs of the re-created session", len(runs), 0)
	cps, err := e.s.ListCheckpoints(e.ctx, id)
	mustOK(e.t, err, "ListCheckpoints of the re-created session")
	equal(e.t, "checkpoints of the re-created session", len(cps), 0)
	has, err := e.s.HasStagedChanges(e.ctx, id)
	mustOK(e.t, err, "HasStagedChanges of the re-created session")
	equal(e.t, "staging of the re-created session", has, false)
	refs, err := e.s.ListSubSessionRefs(e.ctx, id)
	mustOK(e.t, err, "ListSubSessionRefs of the re-created session")
	equal(e.t, "refs of the re-created session", len(refs), 0)
	f, err := e.s.CheckInterruptFlag(e.ctx, id)
	mustOK(e.t, err, "CheckInterruptFlag of the re-created session")
	equal(e.t, "interrupt flag of the re-created session", f.Set, false)
}

func testDeleteSession(e *env) {
	populate(e, "sesn_del")
	populate(e, "sesn_keep")
	mustOK(e.t, e.s.DeleteSession(e.ctx, "sesn_del"), "DeleteSession")
	mustErrIs(e.t, e.s.DeleteSession(e.ctx, "sesn_del"), store.ErrNotFound, "DeleteSession twice")
	assertGone(e, "sesn_del")
	// The neighbour is untouched.
	n, err := e.s.CountMessages(e.ctx, "sesn_keep")
	mustOK(e.t, err, "CountMessages(neighbour)")
	equal(e.t, "neighbour's messages", n, 2)
	_, err = e.s.GetRun(e.ctx, "run_sesn_keep")
	mustOK(e.t, err, "GetRun(neighbour)")
}

func testDeleteExpired(e *env) {
	now := time.Now().Truncate(time.Millisecond).UTC()
	populate(e, "sesn_old")
	_, err := e.s.SaveState(e.ctx, store.SaveStateParams{SessionID: "sesn_old",
		State: store.SessionState{Status: store.StatusCompleted, ExpiresAt: ptr(now.Add(-time.Minute))}})
	mustOK(e.t, err, "SaveState(expired)")
	e.sessionWith(store.CreateSessionParams{ID: "sesn_young", ExpiresAt: ptr(now.Add(time.Minute))})
	e.sessionWith(store.CreateSessionParams{ID: "sesn_forever"})

	n, err := e.s.DeleteExpiredSessions(e.ctx, now)
	mustOK(e.t, err, "DeleteExpiredSessions")
	equal(e.t, "deleted", n, 1)
	assertGone(e, "sesn_old")
	for _, id := range []string{"sesn_young", "sesn_forever"} {
		if ok, _ := e.s.SessionExists(e.ctx, id); !ok {
			e.t.Fatalf("%s was deleted but had not expired", id)
		}
	}
	n, err = e.s.DeleteExpiredSessions(e.ctx, now.Add(2*time.Minute))
	mustOK(e.t, err, "DeleteExpiredSessions later")
	equal(e.t, "deleted later", n, 1)
}

func testListSessions(e *env) {
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("sesn_list_%d", i)
		e.sessionWith(store.CreateSessionParams{ID: id})
		want = append([]string{id}, want...) // newest first
	}
	t2, err := e.s.CreateTenant(e.ctx, store.Tenant{Name: "other-" + e.t.Name()})
	mustOK(e.t, err, "CreateTenant")
	e.sessionWith(store.CreateSessionParams{ID: "sesn_other_tenant", TenantID: t2.ID})

	ids := func(ss []*store.Session) []string {
		out := []string{}
		for _, s := range ss {
			out = append(out, s.ID)
		}
		return out
	}
	all, err := e.s.ListSessions(e.ctx, store.ListSessionsParams{TenantID: e.tenant})
	mustOK(e.t, err, "ListSessions")
	if !reflect.DeepEqual(ids(all), want) {
		e.t.Fatalf("ListSessions: got %v, want %v (newest first, one tenant)", ids(all), want)
	}
	var paged []string
	after := ""
	for range 10 {
		page, err := e.s.ListSessions(e.ctx, store.ListSessionsParams{TenantID: e.tenant, AfterID: after, Limit: 2})
		mustOK(e.t, err, "ListSessions page")
		if len(page) == 0 {
			break
		}
		if len(page) > 2 {
			e.t.Fatalf("page of %d with limit 2", len(page))
		}
		paged = append(paged, ids(page)...)
		after = page[len(page)-1].ID
	}
	if !reflect.DeepEqual(paged, want) {
		e.t.Fatalf("paged ListSessions: got %v, want %v", paged, want)
	}
	other, err := e.s.ListSessions(e.ctx, store.ListSessionsParams{TenantID: t2.ID})
	mustOK(e.t, err, "ListSessions(other tenant)")
	if !reflect.DeepEqual(ids(other), []string{"sesn_other_tenant"}) {
		e.t.Fatalf("other tenant sees %v", ids(other))
	}
}

func testClone(e *env) {
	src := e.sessionWith(store.CreateSessionParams{ID: "sesn_src", AgentType: "writer", CustomState: []byte(`{"a":1}`),
		Metadata: map[string]string{"m": "1"}})
	e.appendMsgs(src.ID, "one", "two", "three")
	_, err := e.s.CreateRun(e.ctx, store.CreateRunParams{SessionID: src.ID})
	mustOK(e.t, err, "CreateRun")
	stage(e, src.ID, "step", "", "staged")
	mustOK(e.t, e.s.SetInterruptFlag(e.ctx, src.ID, "x"), "SetInterruptFlag")
	_, err = e.s.IncrementStepCount(e.ctx, src.ID)
	mustOK(e.t, err, "IncrementStepCount")

	c, err := e.s.CloneSession(e.ctx, store.CloneSessionParams{FromID: src.ID, NewID: "sesn_clone"})
	mustOK(e.t, err, "CloneSession")
	equal(e.t, "clone id", c.ID, "sesn_clone")
	got := e.get("sesn_clone")
	equal(e.t, "tenant defaults to the source's", got.TenantID, e.tenant)
	equal(e.t, "agent type", got.AgentType, "writer")
	equal(e.t, "step count", got.StepCount, 1)
	jsonEq(e.t, "custom state", got.CustomState, `{"a":1}`)
	if !reflect.DeepEqual(got.Metadata, map[string]string{"m": "1"}) {
		e.t.Fatalf("metadata: %v", got.Metadata)
	}
	if txt := texts(e.t, e.messages("sesn_clone")); !reflect.DeepEqual(txt, []string{"one", "two", "three"}) {
		e.t.Fatalf("clone messages: %v", txt)
	}
	runs, err := e.s.ListRuns(e.ctx, "sesn_clone")
	mustOK(e.t, err, "ListRuns(clone)")
	equal(e.t, "runs are not copied", len(runs), 0)
	has, err := e.s.HasStagedChanges(e.ctx, "sesn_clone")
	mustOK(e.t, err, "HasStagedChanges(clone)")
	equal(e.t, "staging is not copied", has, false)
	f, err := e.s.CheckInterruptFlag(e.ctx, "sesn_clone")
	mustOK(e.t, err, "CheckInterruptFlag(clone)")
	equal(e.t, "interrupt flag is not copied", f.Set, false)

	// The clone is independent of its source.
	e.appendMsgs("sesn_clone", "four")
	n, _ := e.s.CountMessages(e.ctx, src.ID)
	equal(e.t, "source messages after appending to the clone", n, 3)

	t2, err := e.s.CreateTenant(e.ctx, store.Tenant{Name: "clone-target-" + e.t.Name()})
	mustOK(e.t, err, "CreateTenant")
	c2, err := e.s.CloneSession(e.ctx, store.CloneSessionParams{FromID: src.ID, NewID: "sesn_clone2", TenantID: t2.ID})
	mustOK(e.t, err, "CloneSession into another tenant")
	equal(e.t, "clone tenant", c2.TenantID, t2.ID)

	_, err = e.s.CloneSession(e.ctx, store.CloneSessionParams{FromID: src.ID, NewID: "sesn_clone"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CloneSession onto an existing id")
	_, err = e.s.CloneSession(e.ctx, store.CloneSessionParams{FromID: "sesn_missing", NewID: "sesn_x"})
	mustErrIs(e.t, err, store.ErrNotFound, "CloneSession(unknown source)")
	if ok, _ := e.s.SessionExists(e.ctx, "sesn_x"); ok {
		e.t.Fatal("a failed clone left a session behind")
	}
}

func testBranch(e *env) {
	src := e.sessionWith(store.CreateSessionParams{ID: "sesn_trunk"})
	e.appendMsgs(src.ID, "u1", "a1")
	stAt := sampleState()
	stAt.Status = store.StatusActive
	stAt.CustomState = []byte(`{"at":"checkpoint"}`)
	_, err := e.s.SaveState(e.ctx, store.SaveStateParams{SessionID: src.ID, State: stAt,
		Checkpoint: &store.CheckpointMeta{ID: "cp_branch", StepCount: 2}})
	mustOK(e.t, err, "SaveState with checkpoint")

	// The trunk moves on past the checkpoint.
	e.appendMsgs(src.ID, "u2", "a2", "u3")
	later := sampleState()
	later.Status = store.StatusCompleted
	later.CustomState = []byte(`{"at":"later"}`)
	later.StepCount = 11
	_, err = e.s.SaveState(e.ctx, store.SaveStateParams{SessionID: src.ID, State: later})
	mustOK(e.t, err, "SaveState later")

	b, err := e.s.CloneSession(e.ctx, store.CloneSessionParams{FromID: src.ID, NewID: "sesn_branch", CheckpointID: "cp_branch"})
	mustOK(e.t, err, "branch")
	got := e.get(b.ID)
	checkState(e, "branch state", sessionState(got), stAt)
	msgsGot := e.messages(b.ID)
	if txt := texts(e.t, msgsGot); !reflect.DeepEqual(txt, []string{"u1", "a1"}) {
		e.t.Fatalf("branch messages: %v, want exactly the two up to the checkpoint", txt)
	}
	equal(e.t, "branch continues at seq 3", e.appendMsgs(b.ID, "what if"), 3)
	n, _ := e.s.CountMessages(e.ctx, src.ID)
	equal(e.t, "trunk messages untouched", n, 5)
	jsonEq(e.t, "trunk state untouched", e.get(src.ID).CustomState, `{"at":"later"}`)

	other := e.session()
	_, err = e.s.CreateCheckpoint(e.ctx, other.ID, store.CheckpointMeta{ID: "cp_other"})
	mustOK(e.t, err, "CreateCheckpoint(other)")
	_, err = e.s.CloneSession(e.ctx, store.CloneSessionParams{FromID: src.ID, NewID: "sesn_b2", CheckpointID: "cp_other"})
	mustErrIs(e.t, err, store.ErrNotFound, "branch from another session's checkpoint")
	_, err = e.s.CloneSession(e.ctx, store.CloneSessionParams{FromID: src.ID, NewID: "sesn_b3", CheckpointID: "cp_missing"})
	mustErrIs(e.t, err, store.ErrNotFound, "branch from an unknown checkpoint")
}
