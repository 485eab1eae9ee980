package storetest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var mgSessionCases = []mgCase{
	{"CreateGetRoundTrip", testMgSessionRoundTrip},
	{"Threads", testMgSessionThreads},
	{"CreateDefaultsAndDuplicate", testMgSessionDefaults},
	{"Invalid", testMgSessionInvalid},
	{"UpdateWritesEveryMutableField", testMgSessionUpdate},
	{"UpdateStaleVersionWritesNothing", testMgSessionUpdateStale},
	{"AppendBumpsVersion", testMgSessionAppendBumpsVersion},
	{"List", testMgSessionList},
	{"DeleteRemovesEventsAndRunRow", testMgSessionDelete},
}

func mSessionID(m *store.ManagedSession) string { return m.ID }

// fullManagedSession has every field set to a non-zero value.
func fullManagedSession(id string) store.ManagedSession {
	return store.ManagedSession{
		ID: id, TenantID: mgTenant, AgentID: "agent_1", AgentVersion: 3, EnvironmentID: "env_1",
		Doc:       json.RawMessage(`{"title":"fix the build","metadata":{"k":"v"},"resources":[]}`),
		SandboxID: "sbx_1", Usage: json.RawMessage(`{"input_tokens":10,"output_tokens":20}`), ProcessedSeq: 7,
		StopReason:   json.RawMessage(`{"type":"end_turn"}`),
		TerminatedAt: sbAtPtr(time.Hour), ArchivedAt: sbAtPtr(2 * time.Hour),
		Version: 99, CreatedAt: sbAt(0), UpdatedAt: sbAt(time.Minute),
	}
}

// sameManagedSession checks every field of got against want.
func sameManagedSession(e *mgEnv, what string, got, want *store.ManagedSession) {
	e.t.Helper()
	t := e.t
	equal(t, what+" ID", got.ID, want.ID)
	equal(t, what+" TenantID", got.TenantID, want.TenantID)
	equal(t, what+" AgentID", got.AgentID, want.AgentID)
	equal(t, what+" AgentVersion", got.AgentVersion, want.AgentVersion)
	equal(t, what+" EnvironmentID", got.EnvironmentID, want.EnvironmentID)
	sbSameJSON(t, what+" Doc", got.Doc, want.Doc)
	equal(t, what+" SandboxID", got.SandboxID, want.SandboxID)
	sbSameJSON(t, what+" Usage", got.Usage, want.Usage)
	equal(t, what+" ProcessedSeq", got.ProcessedSeq, want.ProcessedSeq)
	sbSameJSON(t, what+" StopReason", got.StopReason, want.StopReason)
	sbSameTimePtr(t, what+" TerminatedAt", got.TerminatedAt, want.TerminatedAt)
	sbSameTimePtr(t, what+" ArchivedAt", got.ArchivedAt, want.ArchivedAt)
	equal(t, what+" Version", got.Version, want.Version)
	sbSameTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	sbSameTime(t, what+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	mgUTC(t, what+" CreatedAt", got.CreatedAt)
	mgUTC(t, what+" UpdatedAt", got.UpdatedAt)
	if got.TerminatedAt != nil {
		mgUTC(t, what+" TerminatedAt", *got.TerminatedAt)
	}
}

func testMgSessionRoundTrip(e *mgEnv) {
	in := fullManagedSession("sesn_full")
	out, err := e.s.CreateManagedSession(e.ctx, &in)
	mustOK(e.t, err, "CreateManagedSession")
	want := fullManagedSession("sesn_full")
	want.Version = 1
	sameManagedSession(e, "created", out, &want)
	sameManagedSession(e, "read back", e.getSession("sesn_full"), &want)
	equal(e.t, "caller's Version after create", in.Version, int64(99))
	equal(e.t, "LastEventSeq of a new session", e.lastSeq("sesn_full"), int64(0))
}

func testMgSessionDefaults(e *mgEnv) {
	first := e.session(store.ManagedSession{Usage: json.RawMessage(`null`)})
	second := e.session(store.ManagedSession{})
	mgHasPrefix(e.t, "CreateManagedSession", first.ID, "sesn")
	if !(first.ID < second.ID) {
		e.t.Fatalf("generated ids %q then %q are not time-ordered", first.ID, second.ID)
	}
	if first.CreatedAt.IsZero() {
		e.t.Fatal("CreateManagedSession left CreatedAt zero")
	}
	want := store.ManagedSession{ID: first.ID, TenantID: mgTenant, Doc: json.RawMessage(`{}`), Version: 1,
		CreatedAt: first.CreatedAt, UpdatedAt: first.CreatedAt}
	sameManagedSession(e, "created", first, &want)

	_, err := e.s.CreateManagedSession(e.ctx, &store.ManagedSession{ID: first.ID, TenantID: mgOtherTenant, AgentID: "agent_x"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateManagedSession with a taken id")
	equal(e.t, "AgentID after the refused create", e.getSession(first.ID).AgentID, "")
}

func testMgSessionInvalid(e *mgEnv) {
	bad := []store.ManagedSession{
		{ID: "sesn_doc", Doc: json.RawMessage(`[1]`)},
		{ID: "sesn_usage", Usage: json.RawMessage(`{"input_tokens":`)},
		{ID: "sesn_stop", StopReason: json.RawMessage(`nope`)},
		{ID: "sesn_seq", ProcessedSeq: -1},
	}
	for _, m := range bad {
		m.TenantID = mgTenant
		_, err := e.s.CreateManagedSession(e.ctx, &m)
		mustErrIs(e.t, err, store.ErrInvalid, "CreateManagedSession "+m.ID)
		_, err = e.s.GetManagedSession(e.ctx, m.ID)
		mustErrIs(e.t, err, store.ErrNotFound, "GetManagedSession after a refused create "+m.ID)
	}
	s := e.session(store.ManagedSession{ID: "sesn_ok"})
	s.Doc = json.RawMessage(`"x"`)
	_, err := e.s.UpdateManagedSession(e.ctx, s)
	mustErrIs(e.t, err, store.ErrInvalid, "UpdateManagedSession with a non-object Doc")
	equal(e.t, "Version after the refused update", e.getSession("sesn_ok").Version, int64(1))
}

func testMgSessionUpdate(e *mgEnv) {
	created := e.session(store.ManagedSession{ID: "sesn_up", AgentID: "agent_1", AgentVersion: 1, EnvironmentID: "env_1",
		Doc: json.RawMessage(`{"title":"t"}`), CreatedAt: sbAt(0)})
	next := fullManagedSession("sesn_up")
	// Immutable fields: the store keeps the stored values whatever is sent.
	next.TenantID, next.AgentID, next.AgentVersion, next.EnvironmentID = mgOtherTenant, "agent_2", 9, "env_2"
	next.CreatedAt = sbAt(-time.Hour)
	next.Version = created.Version
	out, err := e.s.UpdateManagedSession(e.ctx, &next)
	mustOK(e.t, err, "UpdateManagedSession")
	want := fullManagedSession("sesn_up")
	want.AgentVersion = 1
	want.Version, want.CreatedAt, want.UpdatedAt = 2, sbAt(0), out.UpdatedAt
	sameManagedSession(e, "updated", out, &want)
	sameManagedSession(e, "read back", e.getSession("sesn_up"), &want)
	if out.UpdatedAt.Equal(sbAt(0)) {
		e.t.Fatal("UpdateManagedSession did not set UpdatedAt")
	}

	// Clearing: nil JSON and times are written as absent.
	cleared := *out
	cleared.Usage, cleared.StopReason, cleared.TerminatedAt, cleared.ArchivedAt, cleared.SandboxID = nil, nil, nil, nil, ""
	out, err = e.s.UpdateManagedSession(e.ctx, &cleared)
	mustOK(e.t, err, "UpdateManagedSession clearing fields")
	got := e.getSession("sesn_up")
	equal(e.t, "Version", got.Version, int64(3))
	sbSameJSON(e.t, "cleared Usage", got.Usage, nil)
	sbSameJSON(e.t, "cleared StopReason", got.StopReason, nil)
	sbSameTimePtr(e.t, "cleared TerminatedAt", got.TerminatedAt, nil)
	sbSameTimePtr(e.t, "cleared ArchivedAt", got.ArchivedAt, nil)
	equal(e.t, "cleared SandboxID", got.SandboxID, "")
	equal(e.t, "returned Version", out.Version, int64(3))
}

func testMgSessionUpdateStale(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_stale", Doc: json.RawMessage(`{"title":"a"}`)})
	first := *s
	first.ProcessedSeq = 1
	_, err := e.s.UpdateManagedSession(e.ctx, &first)
	mustOK(e.t, err, "first UpdateManagedSession")
	stale := *s
	stale.Doc, stale.ProcessedSeq = json.RawMessage(`{"title":"stale"}`), 5
	_, err = e.s.UpdateManagedSession(e.ctx, &stale)
	mustErrIs(e.t, err, store.ErrVersionMismatch, "UpdateManagedSession from version 1 at version 2")
	got := e.getSession("sesn_stale")
	equal(e.t, "Version", got.Version, int64(2))
	equal(e.t, "ProcessedSeq", got.ProcessedSeq, int64(1))
	jsonEq(e.t, "Doc", got.Doc, `{"title":"a"}`)
	missing := store.ManagedSession{ID: "sesn_missing", Version: 1}
	_, err = e.s.UpdateManagedSession(e.ctx, &missing)
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateManagedSession of an unknown session")
	_, err = e.s.GetManagedSession(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetManagedSession of an unknown session")
}

// testMgSessionAppendBumpsVersion: a Managed Agents session is a seed-004
// session, whose version counts every modification — an append of events
// too (one per append). A writer holding the version read before an append
// mismatches and writes nothing; re-read, it succeeds.
func testMgSessionAppendBumpsVersion(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_app"})
	e.appendTypes(s.ID, "user.message", "session.status_running")
	equal(e.t, "Version after one append of two events", e.getSession(s.ID).Version, int64(2))
	next := *s
	next.ProcessedSeq = 1
	_, err := e.s.UpdateManagedSession(e.ctx, &next)
	mustErrIs(e.t, err, store.ErrVersionMismatch, "UpdateManagedSession from the version read before the append")
	equal(e.t, "ProcessedSeq after the refused update", e.getSession(s.ID).ProcessedSeq, int64(0))
	next = *e.getSession(s.ID)
	next.ProcessedSeq = 1
	out, err := e.s.UpdateManagedSession(e.ctx, &next)
	mustOK(e.t, err, "UpdateManagedSession from the version read after the append")
	equal(e.t, "Version", out.Version, int64(3))
	equal(e.t, "ProcessedSeq", out.ProcessedSeq, int64(1))
	equal(e.t, "LastEventSeq after update", e.lastSeq(s.ID), int64(2))
}

func testMgSessionList(e *mgEnv) {
	e.session(store.ManagedSession{ID: "sesn_1", AgentID: "agent_a"})
	e.session(store.ManagedSession{ID: "sesn_2", AgentID: "agent_b"})
	e.session(store.ManagedSession{ID: "sesn_3", AgentID: "agent_a", ArchivedAt: sbAtPtr(0)})
	e.session(store.ManagedSession{ID: "sesn_4", AgentID: "agent_a"})
	e.session(store.ManagedSession{ID: "sesn_5", AgentID: "agent_a", TenantID: mgOtherTenant})
	list := func(p store.ListResourcesParams) []string {
		if p.TenantID == "" {
			p.TenantID = mgTenant
		}
		l, err := e.s.ListManagedSessions(e.ctx, p)
		return mgIDs(e.t, fmt.Sprintf("ListManagedSessions(%+v)", p), l, err, mSessionID)
	}
	mgEqualIDs(e.t, "all", list(store.ListResourcesParams{}), "sesn_1", "sesn_2", "sesn_4")
	mgEqualIDs(e.t, "IncludeArchived", list(store.ListResourcesParams{IncludeArchived: true}), "sesn_1", "sesn_2", "sesn_3", "sesn_4")
	mgEqualIDs(e.t, "AgentID", list(store.ListResourcesParams{AgentID: "agent_a"}), "sesn_1", "sesn_4")
	mgEqualIDs(e.t, "AgentID IncludeArchived Descending", list(store.ListResourcesParams{AgentID: "agent_a",
		IncludeArchived: true, Descending: true}), "sesn_4", "sesn_3", "sesn_1")
	mgEqualIDs(e.t, "other tenant", list(store.ListResourcesParams{TenantID: mgOtherTenant}), "sesn_5")
	mgEqualIDs(e.t, "AfterID Limit", list(store.ListResourcesParams{AfterID: "sesn_1", Limit: 1}), "sesn_2")
	mgEqualIDs(e.t, "BeforeID Descending Limit", list(store.ListResourcesParams{BeforeID: "sesn_4", Descending: true, Limit: 1}), "sesn_2")
}

func testMgSessionDelete(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_del"})
	keep := e.session(store.ManagedSession{ID: "sesn_keep"})
	evs := e.appendTypes(s.ID, "user.message", "agent.message")
	e.appendTypes(keep.ID, "user.message")
	e.runRow(store.RunRow{SessionID: s.ID, Owner: "node-1/boot-1", LeaseExpiresAt: sbAt(time.Minute)})
	e.runRow(store.RunRow{SessionID: keep.ID, Owner: "node-1/boot-1", LeaseExpiresAt: sbAt(time.Minute)})

	mustOK(e.t, e.s.DeleteManagedSession(e.ctx, s.ID), "DeleteManagedSession")
	_, err := e.s.GetManagedSession(e.ctx, s.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetManagedSession after delete")
	_, err = e.s.GetRunRow(e.ctx, s.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetRunRow after delete")
	_, err = e.s.GetEvent(e.ctx, s.ID, evs[0].ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetEvent after delete")
	_, err = e.s.ListEvents(e.ctx, store.ListEventsParams{SessionID: s.ID})
	mustErrIs(e.t, err, store.ErrNotFound, "ListEvents after delete")
	_, err = e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{{Type: "user.message"}})
	mustErrIs(e.t, err, store.ErrNotFound, "AppendEvents after delete")
	mustErrIs(e.t, e.s.DeleteManagedSession(e.ctx, s.ID), store.ErrNotFound, "DeleteManagedSession twice")
	rows, err := e.s.ListRunRows(e.ctx)
	mgEqualIDs(e.t, "run rows after delete", mgIDs(e.t, "ListRunRows", rows, err, runRowID), "sesn_keep")
	equal(e.t, "other session's events", len(e.events(store.ListEventsParams{SessionID: keep.ID})), 1)

	// A session recreated with the id starts from nothing: no leftovers.
	e.session(store.ManagedSession{ID: s.ID})
	again := e.appendTypes(s.ID, "user.message")
	mgEqualSeqs(e.t, "events of the recreated session", again, 1)
	_, err = e.s.GetRunRow(e.ctx, s.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetRunRow of the recreated session")
}
