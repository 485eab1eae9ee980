package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
)

// SessionResourceStorer is what the session resources contract needs: the
// resources and the sessions they belong to.
type SessionResourceStorer interface {
	store.SessionResourceStore
	store.ManagedStore
}

// ExerciseSessionResources runs the SessionResourceStore contract.
// newStore must return a fresh, empty store for each call and arrange its
// Close with t.Cleanup.
func ExerciseSessionResources(ctx context.Context, t *testing.T, newStore func(t *testing.T) SessionResourceStorer) {
	t.Helper()
	cases := []struct {
		name string
		fn   func(ctx context.Context, t *testing.T, s SessionResourceStorer)
	}{
		{"CRUD", testSessionResourceCRUD},
		{"MountPathUniquePerSession", testSessionResourceMountUnique},
		{"UnknownSession", testSessionResourceUnknownSession},
		{"DeletedWithSession", testSessionResourceCascade},
		{"ListPages", testSessionResourceList},
		{"RekeyAtVersion", testSessionResourceRekey},
		{"NotUnderKey", testSessionResourceNotUnderKey},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) { c.fn(ctx, t, newStore(t)) })
	}
}

func srSession(ctx context.Context, t *testing.T, s SessionResourceStorer, id string) {
	t.Helper()
	_, err := s.CreateManagedSession(ctx, &store.ManagedSession{ID: id, TenantID: mgTenant, AgentID: "agent_x", AgentVersion: 1})
	mustOK(t, err, "CreateManagedSession "+id)
}

func srResource(sessionID, id, mount string) *store.SessionResource {
	return &store.SessionResource{ID: id, TenantID: mgTenant, SessionID: sessionID, Kind: "file", MountPath: mount,
		Doc: json.RawMessage(`{"file_id":"file_1"}`)}
}

func testSessionResourceCRUD(ctx context.Context, t *testing.T, s SessionResourceStorer) {
	srSession(ctx, t, s, "sesn_1")
	repo := &store.SessionResource{TenantID: mgTenant, SessionID: "sesn_1", Kind: "github_repository", MountPath: "/workspace/r",
		Doc: json.RawMessage(`{"url":"https://github.com/o/r"}`), Secret: []byte{0, 1, 2, 255}, KeyID: "key_1"}
	out, err := s.CreateSessionResources(ctx, []*store.SessionResource{srResource("sesn_1", "sesrsc_a", "/mnt/a"), repo})
	mustOK(t, err, "CreateSessionResources")
	if len(out) != 2 || out[0].ID != "sesrsc_a" || out[1].ID == "" {
		t.Fatalf("created %+v; want sesrsc_a and a generated id", out)
	}
	if out[0].CreatedAt.IsZero() || !out[0].UpdatedAt.Equal(out[0].CreatedAt) {
		t.Fatalf("times of a new resource: created %v updated %v", out[0].CreatedAt, out[0].UpdatedAt)
	}
	got, err := s.GetSessionResource(ctx, out[1].ID)
	mustOK(t, err, "GetSessionResource")
	if got.Kind != "github_repository" || got.MountPath != "/workspace/r" || got.SessionID != "sesn_1" || got.TenantID != mgTenant ||
		!bytes.Equal(got.Secret, []byte{0, 1, 2, 255}) || got.KeyID != "key_1" {
		t.Fatalf("read back %+v", got)
	}
	var doc map[string]string
	if err := json.Unmarshal(got.Doc, &doc); err != nil || doc["url"] != "https://github.com/o/r" {
		t.Fatalf("doc read back %s (%v)", got.Doc, err)
	}
	if a, _ := s.GetSessionResource(ctx, "sesrsc_a"); len(a.Secret) != 0 || a.KeyID != "" {
		t.Fatalf("a resource without a secret reads back secret %v key %q", a.Secret, a.KeyID)
	}
	up, err := s.UpdateSessionResourceSecret(ctx, got.ID, []byte("new"), "key_2")
	mustOK(t, err, "UpdateSessionResourceSecret")
	if string(up.Secret) != "new" || up.KeyID != "key_2" || up.UpdatedAt.Before(got.UpdatedAt) {
		t.Fatalf("updated %+v", up)
	}
	if _, err := s.UpdateSessionResourceSecret(ctx, "sesrsc_nope", nil, ""); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UpdateSessionResourceSecret(unknown) = %v; want ErrNotFound", err)
	}
	mustOK(t, s.DeleteSessionResource(ctx, got.ID), "DeleteSessionResource")
	if _, err := s.GetSessionResource(ctx, got.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get after delete = %v; want ErrNotFound", err)
	}
	if err := s.DeleteSessionResource(ctx, got.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second delete = %v; want ErrNotFound", err)
	}
}

func testSessionResourceMountUnique(ctx context.Context, t *testing.T, s SessionResourceStorer) {
	srSession(ctx, t, s, "sesn_1")
	srSession(ctx, t, s, "sesn_2")
	_, err := s.CreateSessionResources(ctx, []*store.SessionResource{srResource("sesn_1", "sesrsc_a", "/mnt/x")})
	mustOK(t, err, "first resource")
	// The same path in another session is fine.
	_, err = s.CreateSessionResources(ctx, []*store.SessionResource{srResource("sesn_2", "sesrsc_b", "/mnt/x")})
	mustOK(t, err, "same path, other session")
	// A batch with one taken path writes nothing.
	_, err = s.CreateSessionResources(ctx, []*store.SessionResource{srResource("sesn_1", "sesrsc_c", "/mnt/y"), srResource("sesn_1", "sesrsc_d", "/mnt/x")})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("taken mount path = %v; want ErrConflict", err)
	}
	if _, err := s.GetSessionResource(ctx, "sesrsc_c"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the batch's first resource after its second failed: %v; want ErrNotFound (all or none)", err)
	}
}

func testSessionResourceUnknownSession(ctx context.Context, t *testing.T, s SessionResourceStorer) {
	_, err := s.CreateSessionResources(ctx, []*store.SessionResource{srResource("sesn_nope", "sesrsc_a", "/mnt/x")})
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("resource of an unknown session = %v; want ErrNotFound", err)
	}
}

func testSessionResourceCascade(ctx context.Context, t *testing.T, s SessionResourceStorer) {
	srSession(ctx, t, s, "sesn_1")
	_, err := s.CreateSessionResources(ctx, []*store.SessionResource{srResource("sesn_1", "sesrsc_a", "/mnt/x")})
	mustOK(t, err, "CreateSessionResources")
	mustOK(t, s.DeleteManagedSession(ctx, "sesn_1"), "DeleteManagedSession")
	if _, err := s.GetSessionResource(ctx, "sesrsc_a"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("resource after its session was deleted: %v; want ErrNotFound", err)
	}
}

func testSessionResourceList(ctx context.Context, t *testing.T, s SessionResourceStorer) {
	srSession(ctx, t, s, "sesn_1")
	srSession(ctx, t, s, "sesn_2")
	_, err := s.CreateSessionResources(ctx, []*store.SessionResource{
		srResource("sesn_1", "sesrsc_c", "/c"), srResource("sesn_1", "sesrsc_a", "/a"),
		srResource("sesn_1", "sesrsc_b", "/b"), srResource("sesn_2", "sesrsc_z", "/z"),
	})
	mustOK(t, err, "CreateSessionResources")
	idsOf := func(rs []*store.SessionResource) (out []string) {
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	all, err := s.ListSessionResources(ctx, "sesn_1", "", 0)
	mustOK(t, err, "list all")
	equal(t, "all", strings.Join(idsOf(all), ","), "sesrsc_a,sesrsc_b,sesrsc_c")
	page, err := s.ListSessionResources(ctx, "sesn_1", "sesrsc_a", 1)
	mustOK(t, err, "page")
	equal(t, "page after a", strings.Join(idsOf(page), ","), "sesrsc_b")
	none, err := s.ListSessionResources(ctx, "sesn_nope", "", 0)
	mustOK(t, err, "unknown session")
	equal(t, "unknown session", len(none), 0)
}

// testSessionResourceRekey: a rotation's write is conditional on the
// version it read, so it never puts back a token the API replaced, and it
// leaves updated_at alone.
func testSessionResourceRekey(ctx context.Context, t *testing.T, s SessionResourceStorer) {
	srSession(ctx, t, s, "sesn_1")
	repo := &store.SessionResource{ID: "sesrsc_r", TenantID: mgTenant, SessionID: "sesn_1", Kind: "github_repository", MountPath: "/workspace/r",
		Doc: json.RawMessage(`{"url":"https://github.com/o/r"}`), Secret: []byte("sealed-old"), KeyID: "old"}
	out, err := s.CreateSessionResources(ctx, []*store.SessionResource{repo})
	mustOK(t, err, "CreateSessionResources")
	v1 := out[0]
	equal(t, "version of a new resource", v1.Version, int64(1))
	v2, err := s.RekeySessionResourceSecret(ctx, v1.ID, v1.Version, []byte("sealed-new"), "new")
	mustOK(t, err, "RekeySessionResourceSecret")
	if string(v2.Secret) != "sealed-new" || v2.KeyID != "new" || v2.Version != 2 || !v2.UpdatedAt.Equal(v1.UpdatedAt) {
		t.Fatalf("rekeyed %+v; want the new secret under key new, version 2, updated_at unchanged (%v)", v2, v1.UpdatedAt)
	}
	// The API replaces the token between the rotation's read and write.
	v3, err := s.UpdateSessionResourceSecret(ctx, v1.ID, []byte("sealed-api"), "old")
	mustOK(t, err, "UpdateSessionResourceSecret")
	equal(t, "version after an API write", v3.Version, int64(3))
	if _, err := s.RekeySessionResourceSecret(ctx, v1.ID, v2.Version, []byte("stale"), "new"); !errors.Is(err, store.ErrVersionMismatch) {
		t.Fatalf("rekey at a stale version = %v; want ErrVersionMismatch", err)
	}
	got, err := s.GetSessionResource(ctx, v1.ID)
	mustOK(t, err, "GetSessionResource")
	if string(got.Secret) != "sealed-api" || got.KeyID != "old" {
		t.Fatalf("after a stale rekey the row holds %q under %q; want the API's token", got.Secret, got.KeyID)
	}
	if _, err := s.RekeySessionResourceSecret(ctx, "sesrsc_nope", 1, []byte("x"), "new"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("rekey of an unknown resource = %v; want ErrNotFound", err)
	}
	if _, err := s.RekeySessionResourceSecret(ctx, v1.ID, got.Version, nil, ""); !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("rekey to no secret = %v; want ErrInvalid", err)
	}

	// Concurrent rekeys at one version: exactly one wins.
	errs := make(chan error, 2)
	for i := 0; i < 2; i++ {
		go func() {
			_, err := s.RekeySessionResourceSecret(ctx, v1.ID, got.Version, []byte("raced"), "new")
			errs <- err
		}()
	}
	var won, lost int
	for i := 0; i < 2; i++ {
		switch err := <-errs; {
		case err == nil:
			won++
		case errors.Is(err, store.ErrVersionMismatch):
			lost++
		default:
			t.Fatalf("racing rekey: %v", err)
		}
	}
	if won != 1 || lost != 1 {
		t.Fatalf("racing rekeys: %d won, %d lost; want 1 and 1", won, lost)
	}
}

// testSessionResourceNotUnderKey: the rotation lists every sealed token of
// every session not under the current key, and nothing without a token.
func testSessionResourceNotUnderKey(ctx context.Context, t *testing.T, s SessionResourceStorer) {
	srSession(ctx, t, s, "sesn_1")
	srSession(ctx, t, s, "sesn_2")
	sealed := func(session, id, mount, key string) *store.SessionResource {
		return &store.SessionResource{ID: id, TenantID: mgTenant, SessionID: session, Kind: "github_repository", MountPath: mount,
			Doc: json.RawMessage(`{}`), Secret: []byte("s-" + id), KeyID: key}
	}
	_, err := s.CreateSessionResources(ctx, []*store.SessionResource{
		sealed("sesn_1", "sesrsc_d", "/d", "old"), sealed("sesn_1", "sesrsc_b", "/b", "new"),
		srResource("sesn_1", "sesrsc_a", "/a"), sealed("sesn_2", "sesrsc_c", "/c", "older"),
	})
	mustOK(t, err, "CreateSessionResources")
	idsOf := func(rs []*store.SessionResource) (out []string) {
		for _, r := range rs {
			out = append(out, r.ID)
		}
		return out
	}
	all, err := s.ListSessionResourcesNotUnderKey(ctx, "new", "", 0)
	mustOK(t, err, "ListSessionResourcesNotUnderKey")
	equal(t, "not under new", strings.Join(idsOf(all), ","), "sesrsc_c,sesrsc_d")
	page, err := s.ListSessionResourcesNotUnderKey(ctx, "new", "sesrsc_c", 1)
	mustOK(t, err, "page")
	equal(t, "page after c", strings.Join(idsOf(page), ","), "sesrsc_d")
	if len(all) == 2 && (string(all[0].Secret) != "s-sesrsc_c" || all[0].Version != 1) {
		t.Fatalf("listed row %+v", all[0])
	}
}
