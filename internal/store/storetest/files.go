package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// ExerciseFiles runs the FileStore contract. newStore must return a fresh,
// empty store for each call and arrange its Close with t.Cleanup.
func ExerciseFiles(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.FileStore) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(ctx context.Context, t *testing.T, s store.FileStore)
	}{
		{"CRUD", testFileCRUD},
		{"TenantScoped", testFileTenants},
		{"ListPagesAndFilters", testFileList},
		{"ListExpired", testFileExpired},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(ctx, t, newStore(t)) })
	}
}

func newFileRow(tenant, scope string) *store.File {
	id := ids.New("file")
	return &store.File{ID: id, TenantID: tenant, Filename: "a.txt", MimeType: "text/plain", SizeBytes: 3,
		SHA256: "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", BlobKey: "files/" + id,
		ScopeSessionID: scope}
}

func testFileCRUD(ctx context.Context, t *testing.T, s store.FileStore) {
	exp := time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)
	in := newFileRow("t1", "sesn_1")
	in.Downloadable, in.ExpiresAt = true, &exp
	got, err := s.CreateFile(ctx, in)
	mustOK(t, err, "CreateFile")
	if got.ID != in.ID || got.TenantID != "t1" || got.Filename != "a.txt" || got.MimeType != "text/plain" || got.SizeBytes != 3 ||
		got.SHA256 != in.SHA256 || got.BlobKey != in.BlobKey || !got.Downloadable || got.ScopeSessionID != "sesn_1" ||
		got.ExpiresAt == nil || !got.ExpiresAt.Equal(exp) || got.CreatedAt.IsZero() {
		t.Fatalf("created %+v from %+v", got, in)
	}
	_, err = s.CreateFile(ctx, in)
	mustErrIs(t, err, store.ErrAlreadyExists, "CreateFile twice")

	back, err := s.GetFile(ctx, "t1", in.ID)
	mustOK(t, err, "GetFile")
	if fmt.Sprint(*back) != fmt.Sprint(*got) {
		t.Fatalf("read back %+v, created %+v", back, got)
	}
	del, err := s.DeleteFile(ctx, "t1", in.ID)
	mustOK(t, err, "DeleteFile")
	equal(t, "deleted row's blob key", del.BlobKey, in.BlobKey)
	_, err = s.GetFile(ctx, "t1", in.ID)
	mustErrIs(t, err, store.ErrNotFound, "GetFile after delete")
	_, err = s.DeleteFile(ctx, "t1", in.ID)
	mustErrIs(t, err, store.ErrNotFound, "DeleteFile twice")
}

// Another tenant's file is not found, not listed and not deleted.
func testFileTenants(ctx context.Context, t *testing.T, s store.FileStore) {
	f, err := s.CreateFile(ctx, newFileRow("t1", ""))
	mustOK(t, err, "CreateFile")
	_, err = s.GetFile(ctx, "t2", f.ID)
	mustErrIs(t, err, store.ErrNotFound, "GetFile by another tenant")
	_, err = s.DeleteFile(ctx, "t2", f.ID)
	mustErrIs(t, err, store.ErrNotFound, "DeleteFile by another tenant")
	list, err := s.ListFiles(ctx, store.ListFilesParams{TenantID: "t2"})
	mustOK(t, err, "ListFiles t2")
	equal(t, "files another tenant lists", len(list), 0)
	list, err = s.ListFiles(ctx, store.ListFilesParams{TenantID: "t2", IDs: []string{f.ID}})
	mustOK(t, err, "ListFiles t2 by id")
	equal(t, "files another tenant lists by id", len(list), 0)
	_, err = s.GetFile(ctx, "t1", f.ID)
	mustOK(t, err, "GetFile by the owner after the other tenant's delete")
}

func testFileList(ctx context.Context, t *testing.T, s store.FileStore) {
	var all []string // creation order = id order
	for i := range 5 {
		scope := ""
		if i%2 == 0 {
			scope = "sesn_a"
		}
		f, err := s.CreateFile(ctx, newFileRow("t1", scope))
		mustOK(t, err, "CreateFile")
		all = append(all, f.ID)
	}
	idsOf := func(fs []*store.File) string {
		var out []string
		for _, f := range fs {
			out = append(out, f.ID)
		}
		return fmt.Sprint(out)
	}
	list := func(p store.ListFilesParams) []*store.File {
		t.Helper()
		p.TenantID = "t1"
		fs, err := s.ListFiles(ctx, p)
		mustOK(t, err, "ListFiles")
		return fs
	}
	equal(t, "newest first, limit 2", idsOf(list(store.ListFilesParams{Descending: true, Limit: 2})), fmt.Sprint([]string{all[4], all[3]}))
	equal(t, "newest first before the 4th", idsOf(list(store.ListFilesParams{Descending: true, BeforeID: all[3]})),
		fmt.Sprint([]string{all[2], all[1], all[0]}))
	equal(t, "oldest first after the 2nd", idsOf(list(store.ListFilesParams{AfterID: all[1], Limit: 2})), fmt.Sprint([]string{all[2], all[3]}))
	equal(t, "scope sesn_a", idsOf(list(store.ListFilesParams{ScopeSessionID: "sesn_a"})), fmt.Sprint([]string{all[0], all[2], all[4]}))
	equal(t, "scope with no files", len(list(store.ListFilesParams{ScopeSessionID: "sesn_none"})), 0)
	equal(t, "by ids", idsOf(list(store.ListFilesParams{IDs: []string{all[3], all[1], "file_missing"}})), fmt.Sprint([]string{all[1], all[3]}))
	equal(t, "by ids in scope", idsOf(list(store.ListFilesParams{IDs: []string{all[3], all[2]}, ScopeSessionID: "sesn_a"})), fmt.Sprint([]string{all[2]}))
}

// testFileExpired: the reaper's listing spans tenants, takes files expired
// at or before now (soonest first) and never one without an expiry.
func testFileExpired(ctx context.Context, t *testing.T, s store.FileStore) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	mk := func(tenant string, exp *time.Time) string {
		f := newFileRow(tenant, "")
		f.ExpiresAt = exp
		_, err := s.CreateFile(ctx, f)
		mustOK(t, err, "CreateFile")
		return f.ID
	}
	at := func(d time.Duration) *time.Time { x := now.Add(d); return &x }
	later := mk("t1", at(-time.Minute))
	never := mk("t1", nil)
	sooner := mk("t2", at(-time.Hour))
	exact := mk("t2", at(0))
	notYet := mk("t1", at(time.Second))
	// A listing live at now leaves the expired out in the query: a page of
	// one is the first live file, not an expired one dropped afterwards.
	live, err := s.ListFiles(ctx, store.ListFilesParams{TenantID: "t1", LiveAt: now, Limit: 1})
	mustOK(t, err, "ListFiles live")
	if len(live) != 1 || live[0].ID != never {
		t.Fatalf("first live file of t1 %+v; want %s", live, never)
	}
	live, err = s.ListFiles(ctx, store.ListFilesParams{TenantID: "t1", LiveAt: now})
	mustOK(t, err, "ListFiles live")
	if len(live) != 2 || live[1].ID != notYet {
		t.Fatalf("live files of t1 %+v; want %s and %s", live, never, notYet)
	}
	got, err := s.ListExpiredFiles(ctx, now, 0)
	mustOK(t, err, "ListExpiredFiles")
	var ids []string
	for _, f := range got {
		ids = append(ids, f.ID)
	}
	equal(t, "expired files", fmt.Sprint(ids), fmt.Sprint([]string{sooner, later, exact}))
	one, err := s.ListExpiredFiles(ctx, now, 1)
	mustOK(t, err, "ListExpiredFiles limit 1")
	if len(one) != 1 || one[0].ID != sooner || one[0].TenantID != "t2" || one[0].BlobKey != "files/"+sooner {
		t.Fatalf("first expired file %+v; want %s of t2", one, sooner)
	}
}
