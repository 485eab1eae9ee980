package api

import (
	"errors"
	"net/http"
	"regexp"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

type tenantJSON struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

func toTenantJSON(t *store.Tenant) tenantJSON {
	return tenantJSON{ID: t.ID, Type: "tenant", Name: t.Name, CreatedAt: t.CreatedAt}
}

var tenantName = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// createTenantRequest is the body of POST /v1/tenants.
type createTenantRequest struct {
	Name string `json:"name"`
}

func (s *Server) createTenant(w http.ResponseWriter, r *http.Request) {
	var in createTenantRequest
	if err := decodeJSON(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if !tenantName.MatchString(in.Name) {
		s.writeError(w, r, Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest,
			"field \"name\" must be 1-63 characters of a-z, 0-9, '.', '_' or '-', starting with a letter or digit; got %q", in.Name))
		return
	}
	t, err := s.store.CreateTenant(r.Context(), store.Tenant{ID: ids.New("tnt"), Name: in.Name})
	if errors.Is(err, store.ErrAlreadyExists) {
		s.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "tenant %q already exists", in.Name))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusCreated, toTenantJSON(t))
}

func (s *Server) listTenants(w http.ResponseWriter, r *http.Request) {
	ts, err := s.store.ListTenants(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := listJSON[tenantJSON]{Data: make([]tenantJSON, 0, len(ts))}
	for _, t := range ts {
		out.Data = append(out.Data, toTenantJSON(t))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) getTenant(w http.ResponseWriter, r *http.Request) {
	t, err := s.store.GetTenant(r.Context(), r.PathValue("id"))
	if errors.Is(err, store.ErrNotFound) {
		s.writeError(w, r, NotFound("tenant", r.PathValue("id")))
		return
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toTenantJSON(t))
}
