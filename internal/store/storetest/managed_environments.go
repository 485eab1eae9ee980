package storetest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var mgEnvironmentCases = []mgCase{
	{"CreateGetUpdate", testMgEnvCRUD},
	{"CreateDefaultsAndDuplicate", testMgEnvDefaults},
	{"ArchiveRefusesUpdates", testMgEnvArchive},
	{"Delete", testMgEnvDelete},
	{"ListPages", testMgEnvList},
}

func environmentID(e *store.Environment) string { return e.ID }

func testMgEnvCRUD(e *mgEnv) {
	created := e.environment(store.Environment{ID: "env_1",
		Doc:       json.RawMessage(`{"name":"py","config":{"type":"cloud","networking":{"type":"unrestricted"}}}`),
		CreatedAt: sbAt(0), UpdatedAt: sbAt(time.Second)})
	got, err := e.s.GetEnvironment(e.ctx, "env_1")
	mustOK(e.t, err, "GetEnvironment")
	for what, en := range map[string]*store.Environment{"created": created, "read": got} {
		equal(e.t, what+" TenantID", en.TenantID, mgTenant)
		jsonEq(e.t, what+" Doc", en.Doc, `{"name":"py","config":{"type":"cloud","networking":{"type":"unrestricted"}}}`)
		sbSameTime(e.t, what+" CreatedAt", en.CreatedAt, sbAt(0))
		sbSameTime(e.t, what+" UpdatedAt", en.UpdatedAt, sbAt(time.Second))
		sbSameTimePtr(e.t, what+" ArchivedAt", en.ArchivedAt, nil)
		mgUTC(e.t, what+" CreatedAt", en.CreatedAt)
	}
	up, err := e.s.UpdateEnvironment(e.ctx, "env_1", json.RawMessage(`{"name":"py2"}`))
	mustOK(e.t, err, "UpdateEnvironment")
	jsonEq(e.t, "updated Doc", up.Doc, `{"name":"py2"}`)
	sbSameTime(e.t, "updated CreatedAt", up.CreatedAt, sbAt(0))
	// The store's clock sets UpdatedAt; it is not the creation's 2031 value.
	if up.UpdatedAt.Equal(sbAt(time.Second)) {
		e.t.Fatalf("UpdateEnvironment left UpdatedAt at %v", up.UpdatedAt)
	}
	mgUTC(e.t, "updated UpdatedAt", up.UpdatedAt)
	got, err = e.s.GetEnvironment(e.ctx, "env_1")
	mustOK(e.t, err, "GetEnvironment after update")
	jsonEq(e.t, "read Doc after update", got.Doc, `{"name":"py2"}`)
	sbSameTime(e.t, "read UpdatedAt after update", got.UpdatedAt, up.UpdatedAt)
	_, err = e.s.UpdateEnvironment(e.ctx, "env_1", json.RawMessage(`"str"`))
	mustErrIs(e.t, err, store.ErrInvalid, "UpdateEnvironment with a non-object Doc")
	_, err = e.s.CreateEnvironment(e.ctx, &store.Environment{ID: "env_bad", Doc: json.RawMessage(`[`)})
	mustErrIs(e.t, err, store.ErrInvalid, "CreateEnvironment with bad JSON")
}

func testMgEnvDefaults(e *mgEnv) {
	first := e.environment(store.Environment{})
	second := e.environment(store.Environment{})
	mgHasPrefix(e.t, "CreateEnvironment", first.ID, "env")
	if !(first.ID < second.ID) {
		e.t.Fatalf("generated ids %q then %q are not time-ordered", first.ID, second.ID)
	}
	if first.CreatedAt.IsZero() {
		e.t.Fatal("CreateEnvironment left CreatedAt zero")
	}
	sbSameTime(e.t, "UpdatedAt", first.UpdatedAt, first.CreatedAt)
	jsonEq(e.t, "empty Doc", first.Doc, `{}`)
	_, err := e.s.CreateEnvironment(e.ctx, &store.Environment{ID: first.ID, TenantID: mgTenant, Doc: json.RawMessage(`{"x":1}`)})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateEnvironment with a taken id")
	got, err := e.s.GetEnvironment(e.ctx, first.ID)
	mustOK(e.t, err, "GetEnvironment")
	jsonEq(e.t, "Doc after the refused create", got.Doc, `{}`)
}

func testMgEnvArchive(e *mgEnv) {
	e.environment(store.Environment{ID: "env_arch", Doc: json.RawMessage(`{"name":"a"}`), CreatedAt: sbAt(0)})
	out, err := e.s.ArchiveEnvironment(e.ctx, "env_arch", sbAt(time.Hour))
	mustOK(e.t, err, "ArchiveEnvironment")
	sbSameTimePtr(e.t, "ArchivedAt", out.ArchivedAt, sbAtPtr(time.Hour))
	sbSameTime(e.t, "UpdatedAt", out.UpdatedAt, sbAt(time.Hour))
	_, err = e.s.UpdateEnvironment(e.ctx, "env_arch", json.RawMessage(`{"name":"b"}`))
	mustErrIs(e.t, err, store.ErrConflict, "UpdateEnvironment of an archived environment")
	again, err := e.s.ArchiveEnvironment(e.ctx, "env_arch", sbAt(2*time.Hour))
	mustOK(e.t, err, "ArchiveEnvironment twice")
	sbSameTimePtr(e.t, "ArchivedAt after archiving twice", again.ArchivedAt, sbAtPtr(time.Hour))
	jsonEq(e.t, "Doc", again.Doc, `{"name":"a"}`)
	_, err = e.s.ArchiveEnvironment(e.ctx, "env_missing", sbAt(0))
	mustErrIs(e.t, err, store.ErrNotFound, "ArchiveEnvironment of an unknown environment")
}

func testMgEnvDelete(e *mgEnv) {
	e.environment(store.Environment{ID: "env_del"})
	e.environment(store.Environment{ID: "env_keep"})
	mustOK(e.t, e.s.DeleteEnvironment(e.ctx, "env_del"), "DeleteEnvironment")
	_, err := e.s.GetEnvironment(e.ctx, "env_del")
	mustErrIs(e.t, err, store.ErrNotFound, "GetEnvironment after delete")
	mustErrIs(e.t, e.s.DeleteEnvironment(e.ctx, "env_del"), store.ErrNotFound, "DeleteEnvironment twice")
	_, err = e.s.UpdateEnvironment(e.ctx, "env_del", json.RawMessage(`{}`))
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateEnvironment of a deleted environment")
	_, err = e.s.GetEnvironment(e.ctx, "env_keep")
	mustOK(e.t, err, "GetEnvironment of the other environment")
}

func testMgEnvList(e *mgEnv) {
	for i := range 4 {
		e.environment(store.Environment{ID: fmt.Sprintf("env_%d", i)})
	}
	e.environment(store.Environment{ID: "env_other", TenantID: mgOtherTenant})
	_, err := e.s.ArchiveEnvironment(e.ctx, "env_2", sbAt(0))
	mustOK(e.t, err, "ArchiveEnvironment")
	list := func(p store.ListResourcesParams) []string {
		if p.TenantID == "" {
			p.TenantID = mgTenant
		}
		l, err := e.s.ListEnvironments(e.ctx, p)
		return mgIDs(e.t, fmt.Sprintf("ListEnvironments(%+v)", p), l, err, environmentID)
	}
	mgEqualIDs(e.t, "all", list(store.ListResourcesParams{}), "env_0", "env_1", "env_3")
	mgEqualIDs(e.t, "IncludeArchived", list(store.ListResourcesParams{IncludeArchived: true}), "env_0", "env_1", "env_2", "env_3")
	mgEqualIDs(e.t, "other tenant", list(store.ListResourcesParams{TenantID: mgOtherTenant}), "env_other")
	mgEqualIDs(e.t, "AfterID Limit", list(store.ListResourcesParams{AfterID: "env_0", Limit: 1}), "env_1")
	mgEqualIDs(e.t, "Descending BeforeID", list(store.ListResourcesParams{Descending: true, BeforeID: "env_3", IncludeArchived: true}), "env_2", "env_1", "env_0")
}
