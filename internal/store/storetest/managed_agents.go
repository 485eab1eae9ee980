package storetest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var mgAgentCases = []mgCase{
	{"CreateGetRoundTrip", testMgAgentRoundTrip},
	{"CreateDefaults", testMgAgentDefaults},
	{"CreateDuplicateID", testMgAgentDuplicate},
	{"Invalid", testMgAgentInvalid},
	{"UpdateWritesNewVersion", testMgAgentUpdate},
	{"UpdateStaleVersionWritesNothing", testMgAgentUpdateStale},
	{"ArchiveRefusesUpdates", testMgAgentArchive},
	{"ListLatestVersions", testMgAgentList},
	{"ListPages", testMgAgentListPages},
	{"NotFound", testMgAgentNotFound},
}

func agentID(a *store.Agent) string { return a.ID }

func testMgAgentRoundTrip(e *mgEnv) {
	in := store.Agent{ID: "agent_full", TenantID: mgTenant, Version: 42,
		Doc:       json.RawMessage(`{"name":"coder","model":"claude","tools":[{"type":"agent_toolset_20260401"}]}`),
		CreatedAt: sbAt(0)}
	out, err := e.s.CreateAgent(e.ctx, &in)
	mustOK(e.t, err, "CreateAgent")
	for what, a := range map[string]*store.Agent{"created": out, "latest": e.getAgent("agent_full", 0), "version 1": e.getAgent("agent_full", 1)} {
		equal(e.t, what+" ID", a.ID, "agent_full")
		equal(e.t, what+" TenantID", a.TenantID, mgTenant)
		equal(e.t, what+" Version", a.Version, int64(1))
		jsonEq(e.t, what+" Doc", a.Doc, string(in.Doc))
		sbSameTimePtr(e.t, what+" ArchivedAt", a.ArchivedAt, nil)
		sbSameTime(e.t, what+" CreatedAt", a.CreatedAt, sbAt(0))
		sbSameTime(e.t, what+" UpdatedAt", a.UpdatedAt, sbAt(0))
		mgUTC(e.t, what+" CreatedAt", a.CreatedAt)
		mgUTC(e.t, what+" UpdatedAt", a.UpdatedAt)
	}
	equal(e.t, "caller's Version after create", in.Version, int64(42))
}

func testMgAgentDefaults(e *mgEnv) {
	first := e.agent(store.Agent{})
	second := e.agent(store.Agent{})
	mgHasPrefix(e.t, "CreateAgent", first.ID, "agent")
	if !(first.ID < second.ID) {
		e.t.Fatalf("generated ids %q then %q are not time-ordered", first.ID, second.ID)
	}
	if first.CreatedAt.IsZero() {
		e.t.Fatal("CreateAgent left CreatedAt zero")
	}
	sbSameTime(e.t, "UpdatedAt", first.UpdatedAt, first.CreatedAt)
	equal(e.t, "Version", first.Version, int64(1))
	jsonEq(e.t, "empty Doc", first.Doc, `{}`)
}

func testMgAgentDuplicate(e *mgEnv) {
	e.agent(store.Agent{ID: "agent_dup", Doc: json.RawMessage(`{"name":"first"}`)})
	_, err := e.s.CreateAgent(e.ctx, &store.Agent{ID: "agent_dup", TenantID: mgOtherTenant, Doc: json.RawMessage(`{"name":"second"}`)})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateAgent with a taken id")
	got := e.getAgent("agent_dup", 0)
	jsonEq(e.t, "Doc after the refused create", got.Doc, `{"name":"first"}`)
	equal(e.t, "TenantID after the refused create", got.TenantID, mgTenant)
}

func testMgAgentInvalid(e *mgEnv) {
	for _, doc := range []string{`[1]`, `"x"`, `{`, `null`} {
		_, err := e.s.CreateAgent(e.ctx, &store.Agent{ID: "agent_bad", TenantID: mgTenant, Doc: json.RawMessage(doc)})
		mustErrIs(e.t, err, store.ErrInvalid, "CreateAgent with Doc "+doc)
	}
	a := e.agent(store.Agent{ID: "agent_ok"})
	_, err := e.s.UpdateAgent(e.ctx, a.ID, 1, json.RawMessage(`[]`))
	mustErrIs(e.t, err, store.ErrInvalid, "UpdateAgent with a non-object Doc")
	_, err = e.s.GetAgent(e.ctx, a.ID, -1)
	mustErrIs(e.t, err, store.ErrInvalid, "GetAgent version -1")
	equal(e.t, "Version after refused update", e.getAgent(a.ID, 0).Version, int64(1))
}

func testMgAgentUpdate(e *mgEnv) {
	a := e.agent(store.Agent{ID: "agent_v", Doc: json.RawMessage(`{"name":"v1"}`), CreatedAt: sbAt(0)})
	v2, err := e.s.UpdateAgent(e.ctx, a.ID, 1, json.RawMessage(`{"name":"v2"}`))
	mustOK(e.t, err, "UpdateAgent from 1")
	v3, err := e.s.UpdateAgent(e.ctx, a.ID, 2, json.RawMessage(`{"name":"v3","model":"m"}`))
	mustOK(e.t, err, "UpdateAgent from 2")
	equal(e.t, "v2 Version", v2.Version, int64(2))
	equal(e.t, "v3 Version", v3.Version, int64(3))
	equal(e.t, "v3 TenantID", v3.TenantID, mgTenant)
	mgUTC(e.t, "v3 UpdatedAt", v3.UpdatedAt)
	if v3.UpdatedAt.Before(v2.UpdatedAt) {
		e.t.Fatalf("v3 UpdatedAt %v is before v2's %v", v3.UpdatedAt, v2.UpdatedAt)
	}
	jsonEq(e.t, "latest Doc", e.getAgent(a.ID, 0).Doc, `{"name":"v3","model":"m"}`)
	jsonEq(e.t, "version 1 Doc", e.getAgent(a.ID, 1).Doc, `{"name":"v1"}`)
	jsonEq(e.t, "version 2 Doc", e.getAgent(a.ID, 2).Doc, `{"name":"v2"}`)
	sbSameTime(e.t, "version 1 UpdatedAt", e.getAgent(a.ID, 1).UpdatedAt, sbAt(0))

	versions, err := e.s.ListAgentVersions(e.ctx, a.ID)
	mustOK(e.t, err, "ListAgentVersions")
	equal(e.t, "versions", len(versions), 3)
	for i, v := range versions {
		equal(e.t, fmt.Sprintf("versions[%d].Version", i), v.Version, int64(3-i))
		jsonEq(e.t, fmt.Sprintf("versions[%d].Doc", i), v.Doc, map[int64]string{
			1: `{"name":"v1"}`, 2: `{"name":"v2"}`, 3: `{"name":"v3","model":"m"}`}[v.Version])
		// Every version carries the agent's creation time.
		sbSameTime(e.t, fmt.Sprintf("versions[%d].CreatedAt", i), v.CreatedAt, sbAt(0))
	}
}

func testMgAgentUpdateStale(e *mgEnv) {
	a := e.agent(store.Agent{ID: "agent_stale", Doc: json.RawMessage(`{"name":"v1"}`)})
	_, err := e.s.UpdateAgent(e.ctx, a.ID, 1, json.RawMessage(`{"name":"v2"}`))
	mustOK(e.t, err, "UpdateAgent from 1")
	for _, expected := range []int64{1, 3, 0} {
		_, err = e.s.UpdateAgent(e.ctx, a.ID, expected, json.RawMessage(`{"name":"stale"}`))
		mustErrIs(e.t, err, store.ErrVersionMismatch, fmt.Sprintf("UpdateAgent from %d at version 2", expected))
	}
	versions, err := e.s.ListAgentVersions(e.ctx, a.ID)
	mustOK(e.t, err, "ListAgentVersions")
	equal(e.t, "versions after refused updates", len(versions), 2)
	jsonEq(e.t, "latest Doc", e.getAgent(a.ID, 0).Doc, `{"name":"v2"}`)
	_, err = e.s.UpdateAgent(e.ctx, "agent_missing", 1, json.RawMessage(`{}`))
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateAgent of an unknown agent")
}

func testMgAgentArchive(e *mgEnv) {
	a := e.agent(store.Agent{ID: "agent_arch", Doc: json.RawMessage(`{"name":"v1"}`)})
	_, err := e.s.UpdateAgent(e.ctx, a.ID, 1, json.RawMessage(`{"name":"v2"}`))
	mustOK(e.t, err, "UpdateAgent")
	out, err := e.s.ArchiveAgent(e.ctx, a.ID, sbAt(time.Hour))
	mustOK(e.t, err, "ArchiveAgent")
	equal(e.t, "archived Version", out.Version, int64(2))
	sbSameTimePtr(e.t, "archived ArchivedAt", out.ArchivedAt, sbAtPtr(time.Hour))
	mgUTC(e.t, "ArchivedAt", *out.ArchivedAt)
	sbSameTimePtr(e.t, "version 1 ArchivedAt", e.getAgent(a.ID, 1).ArchivedAt, sbAtPtr(time.Hour))

	_, err = e.s.UpdateAgent(e.ctx, a.ID, 2, json.RawMessage(`{"name":"v3"}`))
	mustErrIs(e.t, err, store.ErrConflict, "UpdateAgent of an archived agent")
	again, err := e.s.ArchiveAgent(e.ctx, a.ID, sbAt(2*time.Hour))
	mustOK(e.t, err, "ArchiveAgent twice")
	sbSameTimePtr(e.t, "ArchivedAt after archiving twice", again.ArchivedAt, sbAtPtr(time.Hour))
	versions, err := e.s.ListAgentVersions(e.ctx, a.ID)
	mustOK(e.t, err, "ListAgentVersions")
	equal(e.t, "versions (archiving makes none)", len(versions), 2)
	_, err = e.s.ArchiveAgent(e.ctx, "agent_missing", sbAt(0))
	mustErrIs(e.t, err, store.ErrNotFound, "ArchiveAgent of an unknown agent")
}

func testMgAgentList(e *mgEnv) {
	e.agent(store.Agent{ID: "agent_c", Doc: json.RawMessage(`{"name":"c"}`)})
	e.agent(store.Agent{ID: "agent_a", Doc: json.RawMessage(`{"name":"a1"}`)})
	e.agent(store.Agent{ID: "agent_b"})
	e.agent(store.Agent{ID: "agent_d"})
	e.agent(store.Agent{ID: "agent_other", TenantID: mgOtherTenant})
	for v := int64(1); v <= 3; v++ {
		_, err := e.s.UpdateAgent(e.ctx, "agent_a", v, json.RawMessage(fmt.Sprintf(`{"name":"a%d"}`, v+1)))
		mustOK(e.t, err, "UpdateAgent agent_a")
	}
	_, err := e.s.ArchiveAgent(e.ctx, "agent_b", sbAt(0))
	mustOK(e.t, err, "ArchiveAgent")

	list, err := e.s.ListAgents(e.ctx, store.ListResourcesParams{TenantID: mgTenant})
	mgEqualIDs(e.t, "ListAgents", mgIDs(e.t, "ListAgents", list, err, agentID), "agent_a", "agent_c", "agent_d")
	equal(e.t, "listed agent_a Version", list[0].Version, int64(4))
	jsonEq(e.t, "listed agent_a Doc", list[0].Doc, `{"name":"a4"}`)

	list, err = e.s.ListAgents(e.ctx, store.ListResourcesParams{TenantID: mgTenant, IncludeArchived: true})
	mgEqualIDs(e.t, "ListAgents IncludeArchived", mgIDs(e.t, "ListAgents", list, err, agentID), "agent_a", "agent_b", "agent_c", "agent_d")
	list, err = e.s.ListAgents(e.ctx, store.ListResourcesParams{TenantID: mgOtherTenant})
	mgEqualIDs(e.t, "ListAgents of the other tenant", mgIDs(e.t, "ListAgents", list, err, agentID), "agent_other")
	list, err = e.s.ListAgents(e.ctx, store.ListResourcesParams{TenantID: "tnt_none"})
	mgEqualIDs(e.t, "ListAgents of a tenant without agents", mgIDs(e.t, "ListAgents", list, err, agentID))
}

func testMgAgentListPages(e *mgEnv) {
	for i := range 5 {
		e.agent(store.Agent{ID: fmt.Sprintf("agent_%d", i)})
	}
	list := func(p store.ListResourcesParams) []string {
		p.TenantID = mgTenant
		l, err := e.s.ListAgents(e.ctx, p)
		return mgIDs(e.t, fmt.Sprintf("ListAgents(%+v)", p), l, err, agentID)
	}
	mgEqualIDs(e.t, "Limit 2", list(store.ListResourcesParams{Limit: 2}), "agent_0", "agent_1")
	mgEqualIDs(e.t, "AfterID", list(store.ListResourcesParams{AfterID: "agent_1", Limit: 2}), "agent_2", "agent_3")
	mgEqualIDs(e.t, "BeforeID", list(store.ListResourcesParams{BeforeID: "agent_2"}), "agent_0", "agent_1")
	mgEqualIDs(e.t, "window", list(store.ListResourcesParams{AfterID: "agent_0", BeforeID: "agent_4"}), "agent_1", "agent_2", "agent_3")
	mgEqualIDs(e.t, "Descending", list(store.ListResourcesParams{Descending: true}), "agent_4", "agent_3", "agent_2", "agent_1", "agent_0")
	mgEqualIDs(e.t, "Descending Limit", list(store.ListResourcesParams{Descending: true, Limit: 2}), "agent_4", "agent_3")
	mgEqualIDs(e.t, "Descending BeforeID", list(store.ListResourcesParams{Descending: true, BeforeID: "agent_3", Limit: 2}), "agent_2", "agent_1")
	mgEqualIDs(e.t, "Descending AfterID", list(store.ListResourcesParams{Descending: true, AfterID: "agent_2"}), "agent_4", "agent_3")
	mgEqualIDs(e.t, "AfterID naming no agent", list(store.ListResourcesParams{AfterID: "agent_2a"}), "agent_3", "agent_4")
	mgEqualIDs(e.t, "past the end", list(store.ListResourcesParams{AfterID: "agent_4"}))
}

func testMgAgentNotFound(e *mgEnv) {
	_, err := e.s.GetAgent(e.ctx, "agent_missing", 0)
	mustErrIs(e.t, err, store.ErrNotFound, "GetAgent of an unknown agent")
	e.agent(store.Agent{ID: "agent_one"})
	_, err = e.s.GetAgent(e.ctx, "agent_one", 2)
	mustErrIs(e.t, err, store.ErrNotFound, "GetAgent of an unknown version")
	_, err = e.s.ListAgentVersions(e.ctx, "agent_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "ListAgentVersions of an unknown agent")
}
