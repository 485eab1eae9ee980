package storetest

import (
	"errors"
	"reflect"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var sessionCases = []testCase{
	{"CreateAndGet", testCreateAndGet},
	{"CreateBadPaths", testCreateBadPaths},
	{"SaveState", testSaveState},
	{"SaveStateStale", testSaveStateStale},
	{"SaveStateWithCheckpoint", testSaveStateWithCheckpoint},
	{"MergeCustomState", testMergeCustomState},
	{"EngineAndPing", testEngineAndPing},
}

func testEngineAndPing(e *env) {
	if e.s.Engine() == "" {
		e.t.Fatal("Engine() is empty")
	}
	mustOK(e.t, e.s.Ping(e.ctx), "Ping")
}

func testCreateAndGet(e *env) {
	exp := time.Now().Add(time.Hour).Truncate(time.Millisecond).UTC()
	created := e.sessionWith(store.CreateSessionParams{
		ID: "sesn_a", AgentType: "researcher",
		CustomState: []byte(`{"topic":"go","n":1}`), Runtime: []byte(`{"output":null}`),
		ParentSessionID: "sesn_parent", RootSessionID: "sesn_root",
		Metadata: map[string]string{"k": "v"}, Tags: []string{"x", "y"}, ExpiresAt: &exp,
	})
	got := e.get("sesn_a")
	for _, s := range []*store.Session{created, got} {
		equal(e.t, "ID", s.ID, "sesn_a")
		equal(e.t, "TenantID", s.TenantID, e.tenant)
		equal(e.t, "AgentType", s.AgentType, "researcher")
		equal(e.t, "Status", s.Status, store.StatusActive)
		equal(e.t, "StepCount", s.StepCount, 0)
		equal(e.t, "ResumeCount", s.ResumeCount, 0)
		equal(e.t, "ParentSessionID", s.ParentSessionID, "sesn_parent")
		equal(e.t, "RootSessionID", s.RootSessionID, "sesn_root")
		equal(e.t, "CheckpointID", s.CheckpointID, "")
		jsonEq(e.t, "CustomState", s.CustomState, `{"topic":"go","n":1}`)
		jsonEq(e.t, "Runtime", s.Runtime, `{"output":null}`)
		if !reflect.DeepEqual(s.Metadata, map[string]string{"k": "v"}) || !reflect.DeepEqual(s.Tags, []string{"x", "y"}) {
			e.t.Fatalf("metadata/tags: got %v %v", s.Metadata, s.Tags)
		}
		if s.ExpiresAt == nil || !s.ExpiresAt.Equal(exp) {
			e.t.Fatalf("ExpiresAt: got %v, want %v", s.ExpiresAt, exp)
		}
		if s.CreatedAt.IsZero() || s.UpdatedAt.IsZero() {
			e.t.Fatalf("timestamps not set: %+v", s)
		}
	}
	equal(e.t, "Version from Get", got.Version, created.Version)
	if !got.CreatedAt.Equal(created.CreatedAt) {
		e.t.Fatalf("CreatedAt: create said %v, get says %v", created.CreatedAt, got.CreatedAt)
	}

	// Defaults: custom and runtime state are empty objects.
	d := e.sessionWith(store.CreateSessionParams{ID: "sesn_defaults"})
	jsonEq(e.t, "default CustomState", d.CustomState, `{}`)
	jsonEq(e.t, "default Runtime", d.Runtime, `{}`)

	ok, err := e.s.SessionExists(e.ctx, "sesn_a")
	mustOK(e.t, err, "SessionExists")
	equal(e.t, "SessionExists(existing)", ok, true)
	ok, err = e.s.SessionExists(e.ctx, "sesn_missing")
	mustOK(e.t, err, "SessionExists(missing)")
	equal(e.t, "SessionExists(missing)", ok, false)
}

func testCreateBadPaths(e *env) {
	e.sessionWith(store.CreateSessionParams{ID: "sesn_dup"})
	_, err := e.s.CreateSession(e.ctx, store.CreateSessionParams{ID: "sesn_dup", TenantID: e.tenant})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "duplicate CreateSession")

	_, err = e.s.CreateSession(e.ctx, store.CreateSessionParams{ID: "sesn_bad1", TenantID: e.tenant,
		CustomState: []byte(`{not json`)})
	mustErrIs(e.t, err, store.ErrInvalid, "CreateSession with malformed custom state")
	_, err = e.s.CreateSession(e.ctx, store.CreateSessionParams{ID: "sesn_bad2", TenantID: e.tenant,
		CustomState: []byte(`[1,2]`)})
	mustErrIs(e.t, err, store.ErrInvalid, "CreateSession with non-object custom state")
	if ok, _ := e.s.SessionExists(e.ctx, "sesn_bad1"); ok {
		e.t.Fatal("an invalid CreateSession left a session behind")
	}

	_, err = e.s.GetSession(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetSession(unknown)")
}

func sampleState() store.SessionState {
	exp := time.Now().Add(2 * time.Hour).Truncate(time.Millisecond).UTC()
	return store.SessionState{
		Status:           store.StatusPaused,
		CustomState:      []byte(`{"plan":["a","b"],"done":false}`),
		Runtime:          []byte(`{"pending":{"call_1":{"tool":"x"}}}`),
		StepCount:        7,
		Error:            "boom",
		FailureReason:    "parent_suspended",
		InterruptContext: []byte(`{"reason":"user"}`),
		Metadata:         map[string]string{"wf": "123"},
		Tags:             []string{"t1"},
		ExpiresAt:        &exp,
	}
}

func checkState(e *env, what string, got store.SessionState, want store.SessionState) {
	e.t.Helper()
	equal(e.t, what+" Status", got.Status, want.Status)
	equal(e.t, what+" StepCount", got.StepCount, want.StepCount)
	equal(e.t, what+" Error", got.Error, want.Error)
	equal(e.t, what+" FailureReason", got.FailureReason, want.FailureReason)
	jsonEq(e.t, what+" CustomState", got.CustomState, string(want.CustomState))
	jsonEq(e.t, what+" Runtime", got.Runtime, string(want.Runtime))
	if want.InterruptContext != nil {
		jsonEq(e.t, what+" InterruptContext", got.InterruptContext, string(want.InterruptContext))
	}
	if !reflect.DeepEqual(got.Metadata, want.Metadata) || !reflect.DeepEqual(got.Tags, want.Tags) {
		e.t.Fatalf("%s metadata/tags: got %v %v, want %v %v", what, got.Metadata, got.Tags, want.Metadata, want.Tags)
	}
	if (got.ExpiresAt == nil) != (want.ExpiresAt == nil) || (got.ExpiresAt != nil && !got.ExpiresAt.Equal(*want.ExpiresAt)) {
		e.t.Fatalf("%s ExpiresAt: got %v, want %v", what, got.ExpiresAt, want.ExpiresAt)
	}
}

func sessionState(s *store.Session) store.SessionState {
	return store.SessionState{Status: s.Status, CustomState: s.CustomState, Runtime: s.Runtime,
		StepCount: s.StepCount, Error: s.Error, FailureReason: s.FailureReason,
		InterruptContext: s.InterruptContext, Metadata: s.Metadata, Tags: s.Tags, ExpiresAt: s.ExpiresAt}
}

func testSaveState(e *env) {
	s0 := e.session()
	st := sampleState()
	s1, err := e.s.SaveState(e.ctx, store.SaveStateParams{SessionID: s0.ID, State: st})
	mustOK(e.t, err, "SaveState")
	if s1.Version <= s0.Version {
		e.t.Fatalf("SaveState did not bump the version: %d -> %d", s0.Version, s1.Version)
	}
	checkState(e, "returned", sessionState(s1), st)
	got := e.get(s0.ID)
	checkState(e, "reloaded", sessionState(got), st)
	equal(e.t, "Version", got.Version, s1.Version)
	equal(e.t, "AgentType kept", got.AgentType, s0.AgentType)
	equal(e.t, "TenantID kept", got.TenantID, s0.TenantID)

	// A matching expected version succeeds.
	st.StepCount = 8
	s2, err := e.s.SaveState(e.ctx, store.SaveStateParams{SessionID: s0.ID, State: st, ExpectedVersion: ptr(s1.Version)})
	mustOK(e.t, err, "SaveState with current version")
	if s2.Version <= s1.Version {
		e.t.Fatalf("version not bumped: %d -> %d", s1.Version, s2.Version)
	}

	_, err = e.s.SaveState(e.ctx, store.SaveStateParams{SessionID: "sesn_missing", State: st})
	mustErrIs(e.t, err, store.ErrNotFound, "SaveState(unknown)")
	bad := st
	bad.Status = "sleeping"
	_, err = e.s.SaveState(e.ctx, store.SaveStateParams{SessionID: s0.ID, State: bad})
	mustErrIs(e.t, err, store.ErrInvalid, "SaveState with unknown status")
	bad = st
	bad.CustomState = []byte(`"str"`)
	_, err = e.s.SaveState(e.ctx, store.SaveStateParams{SessionID: s0.ID, State: bad})
	mustErrIs(e.t, err, store.ErrInvalid, "SaveState with non-object custom state")
	equal(e.t, "version after rejected saves", e.get(s0.ID).Version, s2.Version)
}

func testSaveStateStale(e *env) {
	s0 := e.session()
	_, err := e.s.SaveState(e.ctx, store.SaveStateParams{SessionID: s0.ID, State: sampleState()})
	mustOK(e.t, err, "SaveState")
	before := e.get(s0.ID)

	st := sampleState()
	st.CustomState = []byte(`{"overwritten":true}`)
	_, err = e.s.SaveState(e.ctx, store.SaveStateParams{SessionID: s0.ID, State: st, ExpectedVersion: ptr(s0.Version),
		Checkpoint: &store.CheckpointMeta{ID: "cp_stale"}})
	mustErrIs(e.t, err, store.ErrVersionMismatch, "SaveState with stale version")
	var stale *store.StaleStateError
	if !errors.As(err, &stale) {
		e.t.Fatalf("stale SaveState: error %v is not a *StaleStateError", err)
	}
	equal(e.t, "StaleStateError.SessionID", stale.SessionID, s0.ID)
	equal(e.t, "StaleStateError.ExpectedVersion", stale.ExpectedVersion, s0.Version)
	equal(e.t, "StaleStateError.CurrentVersion", stale.CurrentVersion, before.Version)

	after := e.get(s0.ID)
	equal(e.t, "version after stale save", after.Version, before.Version)
	jsonEq(e.t, "custom state after stale save", after.CustomState, string(before.CustomState))
	_, err = e.s.GetCheckpoint(e.ctx, s0.ID, "cp_stale")
	mustErrIs(e.t, err, store.ErrNotFound, "checkpoint of a stale save")
}

func testSaveStateWithCheckpoint(e *env) {
	s0 := e.session()
	e.appendMsgs(s0.ID, "one", "two")
	st := sampleState()
	s1, err := e.s.SaveState(e.ctx, store.SaveStateParams{SessionID: s0.ID, State: st,
		Checkpoint: &store.CheckpointMeta{ID: "cp_save", StepCount: 7, RunID: "run_x", Metadata: []byte(`{"m":1}`)}})
	mustOK(e.t, err, "SaveState with checkpoint")
	equal(e.t, "pointer in returned session", s1.CheckpointID, "cp_save")
	got := e.get(s0.ID)
	equal(e.t, "pointer", got.CheckpointID, "cp_save")
	equal(e.t, "CheckpointSource", got.CheckpointSource, store.CheckpointSourceSave)
	if got.CheckpointedAt == nil {
		e.t.Fatal("CheckpointedAt not set")
	}
	cp, err := e.s.GetCheckpoint(e.ctx, s0.ID, "cp_save")
	mustOK(e.t, err, "GetCheckpoint")
	equal(e.t, "checkpoint MessageCount", cp.MessageCount, 2)
	equal(e.t, "checkpoint StepCount", cp.StepCount, 7)
	equal(e.t, "checkpoint RunID", cp.RunID, "run_x")
	equal(e.t, "checkpoint Version", cp.Version, got.Version)
	equal(e.t, "checkpoint Source", cp.Source, store.CheckpointSourceSave)
	jsonEq(e.t, "checkpoint Metadata", cp.Metadata, `{"m":1}`)
	checkState(e, "checkpoint state", cp.State, st)
}

func testMergeCustomState(e *env) {
	s0 := e.sessionWith(store.CreateSessionParams{ID: "sesn_m", CustomState: []byte(`{"a":1,"b":{"x":1},"c":3}`)})
	v, err := e.s.MergeCustomState(e.ctx, s0.ID, []byte(`{"a":2,"b":{"y":2},"c":null,"d":[1]}`))
	mustOK(e.t, err, "MergeCustomState")
	if v <= s0.Version {
		e.t.Fatalf("MergeCustomState did not bump the version: %d -> %d", s0.Version, v)
	}
	got := e.get(s0.ID)
	equal(e.t, "returned version", v, got.Version)
	// Top-level merge: b is replaced, not deep-merged; null deletes c.
	jsonEq(e.t, "merged", got.CustomState, `{"a":2,"b":{"y":2},"d":[1]}`)

	_, err = e.s.MergeCustomState(e.ctx, s0.ID, []byte(`[1]`))
	mustErrIs(e.t, err, store.ErrInvalid, "MergeCustomState with a non-object patch")
	_, err = e.s.MergeCustomState(e.ctx, s0.ID, []byte(`{`))
	mustErrIs(e.t, err, store.ErrInvalid, "MergeCustomState with malformed JSON")
	_, err = e.s.MergeCustomState(e.ctx, "sesn_missing", []byte(`{"a":1}`))
	mustErrIs(e.t, err, store.ErrNotFound, "MergeCustomState(unknown)")
	equal(e.t, "version after rejected merges", e.get(s0.ID).Version, v)
}
