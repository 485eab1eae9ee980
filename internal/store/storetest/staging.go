package storetest

import (
	"errors"
	"reflect"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var stagingCases = []testCase{
	{"StageGetHasDiscard", testStaging},
	{"Promote", testPromote},
	{"SaveStateAndPromote", testSaveAndPromote},
	{"SaveStateAndPromoteStaleChangesNothing", testSaveAndPromoteStale},
	{"SaveStateAndPromoteFailureChangesNothing", testSaveAndPromoteFailure},
	{"CleanupOrphaned", testCleanupStaging},
	{"BadPaths", testStagingBadPaths},
}

func stage(e *env, sessionID, step string, writes string, texts ...string) {
	e.t.Helper()
	c := store.StagedChange{SessionID: sessionID, StepID: step, Messages: msgs(texts...)}
	if writes != "" {
		c.StateWrites = []byte(writes)
	}
	mustOK(e.t, e.s.StageChanges(e.ctx, c), "StageChanges "+step)
}

func staged(e *env, id string) []store.StagedChange {
	e.t.Helper()
	c, err := e.s.GetStagedChanges(e.ctx, id)
	mustOK(e.t, err, "GetStagedChanges")
	return c
}

func testStaging(e *env) {
	s0 := e.session()
	has, err := e.s.HasStagedChanges(e.ctx, s0.ID)
	mustOK(e.t, err, "HasStagedChanges")
	equal(e.t, "has before staging", has, false)

	stage(e, s0.ID, "step_1", `{"a":1}`, "m1")
	stage(e, s0.ID, "step_2", "", "m2", "m3")
	got := staged(e, s0.ID)
	if len(got) != 2 || got[0].StepID != "step_1" || got[1].StepID != "step_2" {
		e.t.Fatalf("staged changes: %+v", got)
	}
	jsonEq(e.t, "state writes", got[0].StateWrites, `{"a":1}`)
	equal(e.t, "staged messages", len(got[1].Messages), 2)
	jsonEq(e.t, "staged message content", got[1].Messages[1].Content, `"m3"`)
	equal(e.t, "staged role", got[1].Messages[0].Role, "user")
	if got[0].CreatedAt.IsZero() || got[0].SessionID != s0.ID {
		e.t.Fatalf("staged change fields: %+v", got[0])
	}

	// Staging the same step again replaces it.
	stage(e, s0.ID, "step_1", `{"a":2}`, "m1b")
	got = staged(e, s0.ID)
	equal(e.t, "changes after replacing a step", len(got), 2)
	for _, c := range got {
		if c.StepID == "step_1" {
			jsonEq(e.t, "replaced writes", c.StateWrites, `{"a":2}`)
			jsonEq(e.t, "replaced message", c.Messages[0].Content, `"m1b"`)
		}
	}
	has, _ = e.s.HasStagedChanges(e.ctx, s0.ID)
	equal(e.t, "has after staging", has, true)
	equal(e.t, "staging does not bump the version", e.get(s0.ID).Version, s0.Version)

	mustOK(e.t, e.s.DiscardStaging(e.ctx, s0.ID), "DiscardStaging")
	has, _ = e.s.HasStagedChanges(e.ctx, s0.ID)
	equal(e.t, "has after discard", has, false)
	equal(e.t, "staged after discard", len(staged(e, s0.ID)), 0)
	n, _ := e.s.CountMessages(e.ctx, s0.ID)
	equal(e.t, "discard appends nothing", n, 0)
}

func testPromote(e *env) {
	s0 := e.sessionWith(store.CreateSessionParams{ID: "sesn_p", CustomState: []byte(`{"keep":true,"x":0}`)})
	n, err := e.s.PromoteStaging(e.ctx, s0.ID)
	mustOK(e.t, err, "PromoteStaging(nothing staged)")
	equal(e.t, "promoted with nothing staged", n, 0)

	e.appendMsgs(s0.ID, "existing")
	stage(e, s0.ID, "s1", `{"x":1,"y":1}`, "s1-a", "s1-b")
	stage(e, s0.ID, "s2", `{"x":2,"keep":null}`, "s2-a")
	v := e.get(s0.ID).Version
	n, err = e.s.PromoteStaging(e.ctx, s0.ID)
	mustOK(e.t, err, "PromoteStaging")
	equal(e.t, "promoted", n, 2)
	got := e.get(s0.ID)
	if got.Version <= v {
		e.t.Fatal("PromoteStaging did not bump the version")
	}
	jsonEq(e.t, "custom state after promotion", got.CustomState, `{"x":2,"y":1}`)
	if txt := texts(e.t, e.messages(s0.ID)); !reflect.DeepEqual(txt, []string{"existing", "s1-a", "s1-b", "s2-a"}) {
		e.t.Fatalf("messages after promotion: %v", txt)
	}
	has, _ := e.s.HasStagedChanges(e.ctx, s0.ID)
	equal(e.t, "staging left after promotion", has, false)
}

func testSaveAndPromote(e *env) {
	s0 := e.session()
	e.appendMsgs(s0.ID, "m1")
	stage(e, s0.ID, "step_9", `{"staged":true}`, "staged-1")
	st := sampleState()
	st.CustomState = []byte(`{"saved":1}`)
	res, err := e.s.SaveStateAndPromoteStaging(e.ctx, store.SaveAndPromoteParams{SessionID: s0.ID, State: st,
		AppendMessages:  msgs("appended-1", "appended-2"),
		Checkpoint:      store.CheckpointMeta{ID: "cp_sp", StepCount: 7, RunID: "run_1", Metadata: []byte(`{"why":"suspend"}`)},
		ExpectedVersion: ptr(e.get(s0.ID).Version)})
	mustOK(e.t, err, "SaveStateAndPromoteStaging")
	got := e.get(s0.ID)
	equal(e.t, "NewVersion", res.NewVersion, got.Version)
	equal(e.t, "PromotedStages", res.PromotedStages, 1)
	equal(e.t, "MessageCount", res.MessageCount, 4)
	if txt := texts(e.t, e.messages(s0.ID)); !reflect.DeepEqual(txt, []string{"m1", "appended-1", "appended-2", "staged-1"}) {
		e.t.Fatalf("messages: %v (want existing, then appended, then staged)", txt)
	}
	want := st
	want.CustomState = []byte(`{"saved":1,"staged":true}`)
	checkState(e, "session", sessionState(got), want)
	equal(e.t, "pointer", got.CheckpointID, "cp_sp")
	equal(e.t, "CheckpointSource", got.CheckpointSource, store.CheckpointSourceStaging)

	cp := res.Checkpoint
	equal(e.t, "checkpoint id", cp.ID, "cp_sp")
	equal(e.t, "checkpoint MessageCount", cp.MessageCount, 4)
	equal(e.t, "checkpoint Version", cp.Version, res.NewVersion)
	equal(e.t, "checkpoint Source", cp.Source, store.CheckpointSourceStaging)
	equal(e.t, "checkpoint StepCount", cp.StepCount, 7)
	checkState(e, "checkpoint state", cp.State, want)
	stored, err := e.s.GetCheckpoint(e.ctx, s0.ID, "cp_sp")
	mustOK(e.t, err, "GetCheckpoint")
	checkState(e, "stored checkpoint state", stored.State, want)
	jsonEq(e.t, "checkpoint metadata", stored.Metadata, `{"why":"suspend"}`)
	has, _ := e.s.HasStagedChanges(e.ctx, s0.ID)
	equal(e.t, "staging after promotion", has, false)

	// Nothing staged, no messages: still one atomic state + checkpoint write.
	res2, err := e.s.SaveStateAndPromoteStaging(e.ctx, store.SaveAndPromoteParams{SessionID: s0.ID, State: st,
		Checkpoint: store.CheckpointMeta{StepCount: 0}})
	mustOK(e.t, err, "SaveStateAndPromoteStaging without staging")
	equal(e.t, "PromotedStages", res2.PromotedStages, 0)
	if res2.NewVersion <= res.NewVersion || res2.Checkpoint.ID == "" || res2.Checkpoint.ID == "cp_sp" {
		e.t.Fatalf("second save-and-promote: %+v", res2)
	}
}

// world is everything SaveStateAndPromoteStaging may touch.
type world struct {
	session     store.Session
	messages    []store.Message
	staged      []store.StagedChange
	checkpoints []string
	latest      string
}

func capture(e *env, id string) world {
	e.t.Helper()
	w := world{session: *e.get(id), messages: e.messages(id), staged: staged(e, id)}
	cps, err := e.s.ListCheckpoints(e.ctx, id)
	mustOK(e.t, err, "ListCheckpoints")
	for _, c := range cps {
		w.checkpoints = append(w.checkpoints, c.ID)
	}
	if l, err := e.s.GetLatestCheckpoint(e.ctx, id); err == nil {
		w.latest = l.ID
	}
	return w
}

func sameWorld(e *env, before, after world) {
	e.t.Helper()
	b, a := before.session, after.session
	equal(e.t, "version", a.Version, b.Version)
	equal(e.t, "status", a.Status, b.Status)
	equal(e.t, "step count", a.StepCount, b.StepCount)
	equal(e.t, "checkpoint pointer", a.CheckpointID, b.CheckpointID)
	equal(e.t, "error", a.Error, b.Error)
	jsonEq(e.t, "custom state", a.CustomState, string(b.CustomState))
	jsonEq(e.t, "runtime", a.Runtime, string(b.Runtime))
	if !a.UpdatedAt.Equal(b.UpdatedAt) {
		e.t.Fatalf("UpdatedAt moved: %v -> %v", b.UpdatedAt, a.UpdatedAt)
	}
	if !reflect.DeepEqual(texts(e.t, after.messages), texts(e.t, before.messages)) {
		e.t.Fatalf("messages changed: %v -> %v", texts(e.t, before.messages), texts(e.t, after.messages))
	}
	if len(after.staged) != len(before.staged) {
		e.t.Fatalf("staged changes: %d -> %d", len(before.staged), len(after.staged))
	}
	for i := range before.staged {
		equal(e.t, "staged step", after.staged[i].StepID, before.staged[i].StepID)
	}
	if !reflect.DeepEqual(after.checkpoints, before.checkpoints) {
		e.t.Fatalf("checkpoints: %v -> %v", before.checkpoints, after.checkpoints)
	}
	equal(e.t, "latest checkpoint", after.latest, before.latest)
}

// prepareForPromote builds a session with messages, a checkpoint and staging.
func prepareForPromote(e *env) *store.Session {
	s0 := e.session()
	e.appendMsgs(s0.ID, "m1", "m2")
	_, err := e.s.CreateCheckpoint(e.ctx, s0.ID, store.CheckpointMeta{ID: "cp_before", StepCount: 2})
	mustOK(e.t, err, "CreateCheckpoint")
	stage(e, s0.ID, "step_3", `{"s":3}`, "staged")
	return e.get(s0.ID)
}

func testSaveAndPromoteStale(e *env) {
	s0 := prepareForPromote(e)
	before := capture(e, s0.ID)
	st := sampleState()
	_, err := e.s.SaveStateAndPromoteStaging(e.ctx, store.SaveAndPromoteParams{SessionID: s0.ID, State: st,
		AppendMessages: msgs("should not land"), Checkpoint: store.CheckpointMeta{ID: "cp_stale", StepCount: 9},
		ExpectedVersion: ptr(s0.Version - 1)})
	mustErrIs(e.t, err, store.ErrVersionMismatch, "stale SaveStateAndPromoteStaging")
	var stale *store.StaleStateError
	if !errors.As(err, &stale) {
		e.t.Fatalf("stale SaveStateAndPromoteStaging: %v is not a *StaleStateError", err)
	}
	equal(e.t, "CurrentVersion", stale.CurrentVersion, s0.Version)
	equal(e.t, "ExpectedVersion", stale.ExpectedVersion, s0.Version-1)
	sameWorld(e, before, capture(e, s0.ID))
	_, err = e.s.GetCheckpoint(e.ctx, s0.ID, "cp_stale")
	mustErrIs(e.t, err, store.ErrNotFound, "checkpoint of the stale call")
}

// testSaveAndPromoteFailure: a failure late in the transaction (the
// checkpoint id is taken) rolls back the state, messages and promotion too.
func testSaveAndPromoteFailure(e *env) {
	s0 := prepareForPromote(e)
	before := capture(e, s0.ID)
	_, err := e.s.SaveStateAndPromoteStaging(e.ctx, store.SaveAndPromoteParams{SessionID: s0.ID, State: sampleState(),
		AppendMessages: msgs("should not land"), Checkpoint: store.CheckpointMeta{ID: "cp_before"},
		ExpectedVersion: ptr(s0.Version)})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "SaveStateAndPromoteStaging with a taken checkpoint id")
	sameWorld(e, before, capture(e, s0.ID))

	_, err = e.s.SaveStateAndPromoteStaging(e.ctx, store.SaveAndPromoteParams{SessionID: "sesn_missing",
		State: sampleState()})
	mustErrIs(e.t, err, store.ErrNotFound, "SaveStateAndPromoteStaging(unknown)")
	bad := sampleState()
	bad.Status = ""
	_, err = e.s.SaveStateAndPromoteStaging(e.ctx, store.SaveAndPromoteParams{SessionID: s0.ID, State: bad})
	mustErrIs(e.t, err, store.ErrInvalid, "SaveStateAndPromoteStaging with empty status")
	sameWorld(e, before, capture(e, s0.ID))
}

func testCleanupStaging(e *env) {
	a, b := e.session(), e.session()
	stage(e, a.ID, "old", "", "x")
	first := staged(e, a.ID)[0].CreatedAt
	stage(e, b.ID, "other", "", "y")

	// Thresholds come from the stored CreatedAt so an engine with an
	// injected clock passes too.
	n, err := e.s.CleanupOrphanedStaging(e.ctx, first)
	mustOK(e.t, err, "CleanupOrphanedStaging(at creation)")
	equal(e.t, "removed with a threshold not after creation", n, 0)
	last := staged(e, b.ID)[0].CreatedAt
	n, err = e.s.CleanupOrphanedStaging(e.ctx, last.Add(time.Millisecond))
	mustOK(e.t, err, "CleanupOrphanedStaging")
	equal(e.t, "removed", n, 2)
	equal(e.t, "staged left on a", len(staged(e, a.ID)), 0)
	equal(e.t, "staged left on b", len(staged(e, b.ID)), 0)
}

func testStagingBadPaths(e *env) {
	s0 := e.session()
	mustErrIs(e.t, e.s.StageChanges(e.ctx, store.StagedChange{SessionID: "sesn_missing", StepID: "s", Messages: msgs("x")}),
		store.ErrNotFound, "StageChanges(unknown session)")
	mustErrIs(e.t, e.s.StageChanges(e.ctx, store.StagedChange{SessionID: s0.ID, StepID: ""}),
		store.ErrInvalid, "StageChanges without step id")
	mustErrIs(e.t, e.s.StageChanges(e.ctx, store.StagedChange{SessionID: s0.ID, StepID: "s", StateWrites: []byte(`[1]`)}),
		store.ErrInvalid, "StageChanges with non-object state writes")
	mustErrIs(e.t, e.s.StageChanges(e.ctx, store.StagedChange{SessionID: s0.ID, StepID: "s",
		Messages: []store.NewMessage{{Role: "user", Content: []byte(`{`)}}}),
		store.ErrInvalid, "StageChanges with malformed message")
	_, err := e.s.GetStagedChanges(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetStagedChanges(unknown)")
	_, err = e.s.HasStagedChanges(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "HasStagedChanges(unknown)")
	_, err = e.s.PromoteStaging(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "PromoteStaging(unknown)")
	mustErrIs(e.t, e.s.DiscardStaging(e.ctx, "sesn_missing"), store.ErrNotFound, "DiscardStaging(unknown)")
}
