package managed

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

func newService(t *testing.T) *Service {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, id := range []string{"ten_a", "ten_b"} {
		if _, err := st.CreateTenant(ctx, store.Tenant{ID: id, Name: id}); err != nil {
			t.Fatal(err)
		}
	}
	return New(Options{Store: st})
}

func body(t *testing.T, s string) Obj {
	t.Helper()
	o, err := ParseBody([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// wantInput checks err is the service's refusal with this status, field
// and message (the message is what clients see, byte for byte).
func wantInput(t *testing.T, err error, status int, field, msg string) {
	t.Helper()
	var ie *InputError
	if !errors.As(err, &ie) {
		t.Fatalf("err = %v (%T), want *InputError", err, err)
	}
	if ie.Status != status || ie.Field != field || ie.Msg != msg {
		t.Fatalf("err = {%d %q %q}, want {%d %q %q}", ie.Status, ie.Field, ie.Msg, status, field, msg)
	}
}

func TestAnotherTenantsAgentIsNotFound(t *testing.T) {
	s, ctx := newService(t), context.Background()
	a, err := s.CreateAgent(ctx, "ten_a", body(t, `{"name": "a", "model": "claude-sonnet-4-5"}`))
	if err != nil {
		t.Fatal(err)
	}
	id := a["id"].(string)
	if _, err := s.GetAgent(ctx, "ten_a", id, 0); err != nil {
		t.Fatalf("owner's get: %v", err)
	}
	notFound := `agent "` + id + `" not found`
	_, err = s.GetAgent(ctx, "ten_b", id, 0)
	wantInput(t, err, http.StatusNotFound, "", notFound)
	_, err = s.GetAgent(ctx, "ten_b", id, 2)
	wantInput(t, err, http.StatusNotFound, "", notFound)
	_, err = s.UpdateAgent(ctx, "ten_b", id, body(t, `{"name": "b"}`))
	wantInput(t, err, http.StatusNotFound, "", notFound)
	_, err = s.ArchiveAgent(ctx, "ten_b", id)
	wantInput(t, err, http.StatusNotFound, "", notFound)
	if list, err := s.ListAgents(ctx, "ten_b", store.ListResourcesParams{Limit: 10}); err != nil || len(list) != 0 {
		t.Fatalf("ten_b lists %d agents (%v), want none", len(list), err)
	}
	_, err = s.GetAgent(ctx, "ten_a", id, 2)
	wantInput(t, err, http.StatusNotFound, "", `agent "`+id+`" has no version 2; its latest version is 1`)
}

func TestRefusalsNameTheirField(t *testing.T) {
	s, ctx := newService(t), context.Background()
	_, err := s.CreateAgent(ctx, "ten_a", body(t, `{"model": "claude-sonnet-4-5"}`))
	wantInput(t, err, http.StatusBadRequest, "name", `field "name" is required`)
	_, err = s.CreateAgent(ctx, "ten_a", body(t, `{"name": "a", "model": "m", "tools": [{"type": "custom", "name": "t", "input_schema": {}, "colour": 1}]}`))
	wantInput(t, err, http.StatusBadRequest, "tools[0].colour", `unknown field "tools[0].colour"`)
	_, err = s.CreateEnvironment(ctx, "ten_a", body(t, `{"name": "e", "scope": "galaxy"}`))
	wantInput(t, err, http.StatusBadRequest, "scope", `field "scope" must be organization or account`)
	a, err := s.CreateAgent(ctx, "ten_a", body(t, `{"name": "a", "model": "m"}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.UpdateAgent(ctx, "ten_a", a["id"].(string), body(t, `{"version": 7, "name": "b"}`))
	wantInput(t, err, http.StatusConflict, "", `agent "`+a["id"].(string)+`" is at version 1, not 7 (field "version"); retrieve it and apply your change again`)
}
