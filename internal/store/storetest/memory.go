package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ExerciseMemoryStores runs the MemoryStores contract (memory stores,
// their memories and version history). newStore must return a fresh, empty
// store for each call and arrange its Close with t.Cleanup.
func ExerciseMemoryStores(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.MemoryStores) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(e *memEnv)
	}{
		{"StoreCRUD", testMemStoreCRUD},
		{"ArchivedStoreRefusesWrites", testMemStoreArchived},
		{"MemoryWritesKeepHistory", testMemoryHistory},
		{"Preconditions", testMemoryPreconditions},
		{"PathsAreUnique", testMemoryPathsUnique},
		{"PutAtPathIsIdempotent", testMemoryPutAtPath},
		{"ListByPrefix", testMemoryListPrefix},
		{"VersionFiltersAndRedaction", testMemoryVersions},
		{"DeleteStoreCascades", testMemStoreDelete},
		{"ConcurrentPutsKeepEveryVersion", testMemoryConcurrentPuts},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(&memEnv{ctx: ctx, t: t, s: newStore(t)})
		})
	}
}

type memEnv struct {
	ctx context.Context
	t   *testing.T
	s   store.MemoryStores
}

var (
	memT0        = time.Date(2026, 7, 1, 12, 0, 0, 0, time.UTC)
	apiActor     = store.MemoryActor{Type: "api_actor", ID: "key_1"}
	sessionActor = store.MemoryActor{Type: "session_actor", ID: "sesn_1"}
)

func strp(s string) *string { return &s }

func (e *memEnv) memStore(name string) *store.MemoryStore {
	e.t.Helper()
	m, err := e.s.CreateMemoryStore(e.ctx, &store.MemoryStore{TenantID: mgTenant, Name: name, Metadata: map[string]string{"k": "v"}})
	mustOK(e.t, err, "CreateMemoryStore")
	return m
}

func (e *memEnv) memory(storeID, path, content string) *store.Memory {
	e.t.Helper()
	m, err := e.s.CreateMemory(e.ctx, store.MemoryWrite{TenantID: mgTenant, StoreID: storeID, Path: path, Content: strp(content), Actor: apiActor})
	mustOK(e.t, err, "CreateMemory "+path)
	return m
}

func (e *memEnv) versions(p store.MemoryVersionListParams) []*store.MemoryVersion {
	e.t.Helper()
	vs, err := e.s.ListMemoryVersions(e.ctx, p)
	mustOK(e.t, err, "ListMemoryVersions")
	return vs
}

func testMemStoreCRUD(e *memEnv) {
	m := e.memStore("notes")
	if m.ID == "" || m.Name != "notes" || m.Metadata["k"] != "v" || m.ArchivedAt != nil || m.CreatedAt.IsZero() {
		e.t.Fatalf("created %+v", m)
	}
	got, err := e.s.GetMemoryStore(e.ctx, m.ID)
	mustOK(e.t, err, "GetMemoryStore")
	if got.Name != "notes" || !got.CreatedAt.Equal(m.CreatedAt) {
		e.t.Fatalf("got %+v, want %+v", got, m)
	}
	got.Name, got.Description, got.Metadata = "renamed", "about", map[string]string{"x": "y"}
	up, err := e.s.UpdateMemoryStore(e.ctx, got)
	mustOK(e.t, err, "UpdateMemoryStore")
	if up.Name != "renamed" || up.Description != "about" || up.Metadata["x"] != "y" || up.Metadata["k"] != "" {
		e.t.Fatalf("updated %+v", up)
	}
	_, err = e.s.GetMemoryStore(e.ctx, "memstore_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "get a missing store")
	e.memStore("second")
	all, err := e.s.ListMemoryStores(e.ctx, store.ListResourcesParams{TenantID: mgTenant, Limit: 1})
	mustOK(e.t, err, "ListMemoryStores")
	if len(all) != 1 || all[0].ID != m.ID {
		e.t.Fatalf("first page %+v", all)
	}
	other, err := e.s.ListMemoryStores(e.ctx, store.ListResourcesParams{TenantID: mgOtherTenant})
	mustOK(e.t, err, "ListMemoryStores other tenant")
	if len(other) != 0 {
		e.t.Fatalf("another tenant lists %d stores", len(other))
	}
}

func testMemStoreArchived(e *memEnv) {
	m := e.memStore("a")
	mem := e.memory(m.ID, "/a.md", "x")
	a, err := e.s.ArchiveMemoryStore(e.ctx, m.ID, memT0)
	mustOK(e.t, err, "ArchiveMemoryStore")
	again, err := e.s.ArchiveMemoryStore(e.ctx, m.ID, memT0.Add(1e9))
	mustOK(e.t, err, "archive again")
	if a.ArchivedAt == nil || !again.ArchivedAt.Equal(*a.ArchivedAt) {
		e.t.Fatalf("archived_at %v then %v", a.ArchivedAt, again.ArchivedAt)
	}
	_, err = e.s.UpdateMemoryStore(e.ctx, a)
	mustErrIs(e.t, err, store.ErrConflict, "update an archived store")
	_, err = e.s.CreateMemory(e.ctx, store.MemoryWrite{TenantID: mgTenant, StoreID: m.ID, Path: "/b.md", Content: strp("y")})
	mustErrIs(e.t, err, store.ErrConflict, "create in an archived store")
	_, err = e.s.UpdateMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: mem.ID, Content: strp("z")})
	mustErrIs(e.t, err, store.ErrConflict, "update in an archived store")
	_, _, err = e.s.PutMemoryAtPath(e.ctx, store.MemoryWrite{TenantID: mgTenant, StoreID: m.ID, Path: "/a.md", Content: strp("z")})
	mustErrIs(e.t, err, store.ErrConflict, "put in an archived store")
	mustErrIs(e.t, e.s.DeleteMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: mem.ID}), store.ErrConflict, "delete in an archived store")
	got, err := e.s.GetMemory(e.ctx, mem.ID)
	mustOK(e.t, err, "read a memory of an archived store")
	if got.Content != "x" {
		e.t.Fatalf("content %q", got.Content)
	}
	archived, err := e.s.ListMemoryStores(e.ctx, store.ListResourcesParams{TenantID: mgTenant})
	mustOK(e.t, err, "list")
	withArchived, err := e.s.ListMemoryStores(e.ctx, store.ListResourcesParams{TenantID: mgTenant, IncludeArchived: true})
	mustOK(e.t, err, "list archived")
	if len(archived) != 0 || len(withArchived) != 1 {
		e.t.Fatalf("listed %d live, %d with archived", len(archived), len(withArchived))
	}
}

func testMemoryHistory(e *memEnv) {
	m := e.memStore("h")
	mem := e.memory(m.ID, "/notes/a.md", "one")
	sha, size := store.MemoryDigest("one")
	if mem.ContentSHA256 != sha || mem.SizeBytes != size || mem.VersionID == "" || mem.Path != "/notes/a.md" {
		e.t.Fatalf("created %+v", mem)
	}
	up, err := e.s.UpdateMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: mem.ID, Content: strp("two"), Actor: sessionActor})
	mustOK(e.t, err, "UpdateMemory content")
	same, err := e.s.UpdateMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: mem.ID, Content: strp("two")})
	mustOK(e.t, err, "UpdateMemory no change")
	if same.VersionID != up.VersionID {
		e.t.Fatalf("an update that changes nothing made version %s", same.VersionID)
	}
	mv, err := e.s.UpdateMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: mem.ID, Path: "/notes/b.md"})
	mustOK(e.t, err, "rename")
	if mv.ID != mem.ID || mv.Path != "/notes/b.md" || mv.Content != "two" {
		e.t.Fatalf("renamed %+v", mv)
	}
	mustOK(e.t, e.s.DeleteMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: mem.ID, Actor: apiActor}), "DeleteMemory")
	_, err = e.s.GetMemory(e.ctx, mem.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "get a deleted memory")
	vs := e.versions(store.MemoryVersionListParams{StoreID: m.ID, MemoryID: mem.ID})
	if len(vs) != 4 {
		e.t.Fatalf("%d versions, want 4", len(vs))
	}
	want := []struct{ op, path, content string }{
		{store.MemoryDeleted, "/notes/b.md", ""}, {store.MemoryModified, "/notes/b.md", "two"},
		{store.MemoryModified, "/notes/a.md", "two"}, {store.MemoryCreated, "/notes/a.md", "one"},
	}
	for i, w := range want {
		v := vs[i]
		if v.Operation != w.op || v.Path != w.path || v.Content != w.content || v.MemoryID != mem.ID || v.StoreID != m.ID {
			e.t.Fatalf("version %d: %+v, want %+v", i, v, w)
		}
	}
	if vs[2].CreatedBy != sessionActor || vs[3].CreatedBy != apiActor || vs[0].ContentSHA256 != "" {
		e.t.Fatalf("actors %+v %+v, deleted sha %q", vs[2].CreatedBy, vs[3].CreatedBy, vs[0].ContentSHA256)
	}
}

func testMemoryPreconditions(e *memEnv) {
	m := e.memStore("p")
	mem := e.memory(m.ID, "/p.md", "v1")
	_, err := e.s.UpdateMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: mem.ID, Content: strp("v2"), ExpectSHA256: "00"})
	mustErrIs(e.t, err, store.ErrVersionMismatch, "update with a stale digest")
	up, err := e.s.UpdateMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: mem.ID, Content: strp("v2"), ExpectSHA256: mem.ContentSHA256})
	mustOK(e.t, err, "update with the current digest")
	mustErrIs(e.t, e.s.DeleteMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: mem.ID, ExpectSHA256: mem.ContentSHA256}),
		store.ErrVersionMismatch, "delete with a stale digest")
	mustOK(e.t, e.s.DeleteMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: mem.ID, ExpectSHA256: up.ContentSHA256}), "delete")
	other := e.memStore("other")
	x := e.memory(other.ID, "/x.md", "x")
	_, err = e.s.UpdateMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: x.ID, Content: strp("y")})
	mustErrIs(e.t, err, store.ErrNotFound, "update a memory through another store")
}

func testMemoryPathsUnique(e *memEnv) {
	m := e.memStore("u")
	a := e.memory(m.ID, "/a.md", "a")
	e.memory(m.ID, "/b.md", "b")
	_, err := e.s.CreateMemory(e.ctx, store.MemoryWrite{TenantID: mgTenant, StoreID: m.ID, Path: "/a.md", Content: strp("again")})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "create on a taken path")
	_, err = e.s.UpdateMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: a.ID, Path: "/b.md"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "rename onto a taken path")
	mustOK(e.t, e.s.DeleteMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: a.ID}), "delete")
	re := e.memory(m.ID, "/a.md", "reborn")
	if re.ID == a.ID {
		e.t.Fatal("a memory created on a freed path reused the deleted memory's id")
	}
	other := e.memStore("o")
	e.memory(other.ID, "/a.md", "same path, other store")
}

func testMemoryPutAtPath(e *memEnv) {
	m := e.memStore("s")
	w := store.MemoryWrite{TenantID: mgTenant, StoreID: m.ID, Path: "/s.md", Content: strp("x"), Actor: sessionActor}
	first, changed, err := e.s.PutMemoryAtPath(e.ctx, w)
	mustOK(e.t, err, "put new")
	if !changed || first.Content != "x" {
		e.t.Fatalf("put new: %+v %v", first, changed)
	}
	again, changed, err := e.s.PutMemoryAtPath(e.ctx, w)
	mustOK(e.t, err, "put same")
	if changed || again.VersionID != first.VersionID {
		e.t.Fatalf("repeating a put wrote version %s (changed %v)", again.VersionID, changed)
	}
	w.Content = strp("y")
	mod, changed, err := e.s.PutMemoryAtPath(e.ctx, w)
	mustOK(e.t, err, "put changed")
	if !changed || mod.ID != first.ID || mod.Content != "y" {
		e.t.Fatalf("put changed: %+v %v", mod, changed)
	}
	w.Content = nil
	// A deletion made on a version that is no longer current keeps the
	// newer one and returns it.
	w.DeleteIfVersion = first.VersionID
	kept, changed, err := e.s.PutMemoryAtPath(e.ctx, w)
	mustOK(e.t, err, "stale delete")
	if changed || kept == nil || kept.VersionID != mod.VersionID {
		e.t.Fatalf("a delete on version %s of a memory now at %s: %+v changed %v", first.VersionID, mod.VersionID, kept, changed)
	}
	w.DeleteIfVersion = mod.VersionID
	for i, wantChanged := range []bool{true, false} {
		gone, changed, err := e.s.PutMemoryAtPath(e.ctx, w)
		mustOK(e.t, err, "put delete")
		if gone != nil || changed != wantChanged {
			e.t.Fatalf("delete %d: %+v changed %v", i, gone, changed)
		}
	}
	if vs := e.versions(store.MemoryVersionListParams{StoreID: m.ID}); len(vs) != 3 {
		e.t.Fatalf("%d versions, want created, modified, deleted", len(vs))
	}
	_, _, err = e.s.PutMemoryAtPath(e.ctx, store.MemoryWrite{StoreID: "memstore_missing", Path: "/x", Content: strp("x")})
	mustErrIs(e.t, err, store.ErrNotFound, "put into a missing store")
}

func testMemoryListPrefix(e *memEnv) {
	m := e.memStore("l")
	for _, p := range []string{"/a/1.md", "/a/2.md", "/a/b/3.md", "/a-b/4.md", "/a%/5.md", "/z.md"} {
		e.memory(m.ID, p, p)
	}
	list := func(p store.MemoryListParams) []string {
		p.StoreID = m.ID
		ms, err := e.s.ListMemories(e.ctx, p)
		mustOK(e.t, err, "ListMemories")
		var out []string
		for _, x := range ms {
			out = append(out, x.Path)
		}
		return out
	}
	if got := list(store.MemoryListParams{PathPrefix: "/a/"}); len(got) != 3 || got[0] != "/a/1.md" || got[2] != "/a/b/3.md" {
		e.t.Fatalf("prefix /a/: %v", got)
	}
	if got := list(store.MemoryListParams{PathPrefix: "/a%/"}); len(got) != 1 || got[0] != "/a%/5.md" {
		e.t.Fatalf("prefix /a%%/ (a literal %%): %v", got)
	}
	if got := list(store.MemoryListParams{PathPrefix: "/a/", AfterPath: "/a/1.md", Limit: 1}); len(got) != 1 || got[0] != "/a/2.md" {
		e.t.Fatalf("page after /a/1.md: %v", got)
	}
	if got := list(store.MemoryListParams{}); len(got) != 6 || got[0] != "/a%/5.md" || got[5] != "/z.md" {
		e.t.Fatalf("all, bytewise: %v", got)
	}
}

func testMemoryVersions(e *memEnv) {
	m := e.memStore("v")
	mem := e.memory(m.ID, "/v.md", "secret")
	up, err := e.s.UpdateMemory(e.ctx, store.MemoryWrite{StoreID: m.ID, ID: mem.ID, Content: strp("clean"), Actor: sessionActor})
	mustOK(e.t, err, "update")
	if vs := e.versions(store.MemoryVersionListParams{StoreID: m.ID, Actor: sessionActor}); len(vs) != 1 || vs[0].ID != up.VersionID {
		e.t.Fatalf("by session: %+v", vs)
	}
	if vs := e.versions(store.MemoryVersionListParams{StoreID: m.ID, Operation: store.MemoryCreated}); len(vs) != 1 || vs[0].ID != mem.VersionID {
		e.t.Fatalf("created: %+v", vs)
	}
	if vs := e.versions(store.MemoryVersionListParams{StoreID: m.ID, BeforeID: up.VersionID, Limit: 5}); len(vs) != 1 || vs[0].ID != mem.VersionID {
		e.t.Fatalf("page before the newest: %+v", vs)
	}
	_, err = e.s.RedactMemoryVersion(e.ctx, up.VersionID, apiActor, memT0)
	mustErrIs(e.t, err, store.ErrConflict, "redact the current version")
	r, err := e.s.RedactMemoryVersion(e.ctx, mem.VersionID, apiActor, memT0)
	mustOK(e.t, err, "redact")
	if r.RedactedAt == nil || r.Content != "" || r.Path != "" || r.ContentSHA256 != "" || r.RedactedBy != apiActor || r.CreatedBy != apiActor || r.Operation != store.MemoryCreated {
		e.t.Fatalf("redacted %+v", r)
	}
	again, err := e.s.RedactMemoryVersion(e.ctx, mem.VersionID, sessionActor, memT0.Add(1e9))
	mustOK(e.t, err, "redact again")
	if !again.RedactedAt.Equal(*r.RedactedAt) || again.RedactedBy != apiActor {
		e.t.Fatalf("second redaction changed it: %+v", again)
	}
	got, err := e.s.GetMemoryVersion(e.ctx, mem.VersionID)
	mustOK(e.t, err, "get")
	if got.Content != "" || got.RedactedAt == nil {
		e.t.Fatalf("read back %+v", got)
	}
	_, err = e.s.RedactMemoryVersion(e.ctx, "memver_missing", apiActor, memT0)
	mustErrIs(e.t, err, store.ErrNotFound, "redact a missing version")
}

func testMemStoreDelete(e *memEnv) {
	m := e.memStore("d")
	mem := e.memory(m.ID, "/d.md", "d")
	mustOK(e.t, e.s.DeleteMemoryStore(e.ctx, m.ID), "DeleteMemoryStore")
	_, err := e.s.GetMemory(e.ctx, mem.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "memory of a deleted store")
	_, err = e.s.GetMemoryVersion(e.ctx, mem.VersionID)
	mustErrIs(e.t, err, store.ErrNotFound, "version of a deleted store")
	mustErrIs(e.t, e.s.DeleteMemoryStore(e.ctx, m.ID), store.ErrNotFound, "delete twice")
}

// testMemoryConcurrentPuts: writers racing on one path each get their
// write recorded as a version; none is lost to another.
func testMemoryConcurrentPuts(e *memEnv) {
	m := e.memStore("c")
	const writers = 8
	var wg sync.WaitGroup
	errs := make(chan error, writers)
	for i := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := string(rune('a' + i))
			_, _, err := e.s.PutMemoryAtPath(e.ctx, store.MemoryWrite{TenantID: mgTenant, StoreID: m.ID, Path: "/race.md", Content: &c,
				Actor: store.MemoryActor{Type: "session_actor", ID: "sesn_" + c}})
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		mustOK(e.t, err, "concurrent put")
	}
	vs := e.versions(store.MemoryVersionListParams{StoreID: m.ID})
	seen := map[string]bool{}
	for _, v := range vs {
		seen[v.Content] = true
	}
	if len(vs) != writers || len(seen) != writers {
		e.t.Fatalf("%d versions with %d distinct contents, want %d of each", len(vs), len(seen), writers)
	}
	ms, err := e.s.ListMemories(e.ctx, store.MemoryListParams{StoreID: m.ID})
	mustOK(e.t, err, "list")
	if len(ms) != 1 || ms[0].VersionID != vs[0].ID {
		e.t.Fatalf("memories %+v; the newest version %s must be current", ms, vs[0].ID)
	}
}
