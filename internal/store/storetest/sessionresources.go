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
