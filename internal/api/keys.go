package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/agentkernel/agentkernel/internal/auth"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

type keyJSON struct {
	ID        string     `json:"id"`
	Type      string     `json:"type"`
	TenantID  string     `json:"tenant_id"`
	Name      string     `json:"name"`
	Prefix    string     `json:"prefix"`
	Admin     bool       `json:"admin"`
	CreatedAt time.Time  `json:"created_at"`
	RevokedAt *time.Time `json:"revoked_at,omitempty"`
	Secret    string     `json:"secret,omitempty"`
}

func toKeyJSON(k *store.APIKey) keyJSON {
	return keyJSON{ID: k.ID, Type: "api_key", TenantID: k.TenantID, Name: k.Name, Prefix: k.Prefix,
		Admin: k.Admin, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
}

type listJSON[T any] struct {
	Data    []T  `json:"data"`
	HasMore bool `json:"has_more"`
}

const maxNameLen = 200

// createKeyRequest is the body of POST /v1/keys.
type createKeyRequest struct {
	Name     string `json:"name"`
	TenantID string `json:"tenant_id"`
	Admin    bool   `json:"admin"`
}

func (s *Server) createKey(w http.ResponseWriter, r *http.Request) {
	var in createKeyRequest
	if err := decodeJSON(r, &in); err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := firstErr(requireField("name", in.Name), maxLen("name", in.Name, maxNameLen)); err != nil {
		s.writeError(w, r, err)
		return
	}
	if in.TenantID == "" {
		in.TenantID = PrincipalFrom(r.Context()).TenantID
	}
	if _, err := s.store.GetTenant(r.Context(), in.TenantID); errors.Is(err, store.ErrNotFound) {
		s.writeError(w, r, Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field \"tenant_id\": tenant %q does not exist", in.TenantID))
		return
	} else if err != nil {
		s.writeError(w, r, err)
		return
	}
	secret := auth.NewSecret()
	k, err := s.store.CreateAPIKey(r.Context(), store.CreateAPIKeyParams{
		ID: ids.New("key"), TenantID: in.TenantID, Name: in.Name,
		Prefix: auth.Prefix(secret), Hash: auth.Hash(secret), Admin: in.Admin,
	})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.keys.purge() // a cached "invalid" for this secret must not outlive its creation
	out := toKeyJSON(k)
	out.Secret = secret
	writeJSON(w, http.StatusCreated, out)
}

// visibleKey loads a key the caller may see: admins see every key, others
// only their own tenant's; anything else is 404, never 403.
func (s *Server) visibleKey(r *http.Request, id string) (*store.APIKey, error) {
	k, err := s.store.GetAPIKey(r.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, NotFound("api key", id)
	}
	if err != nil {
		return nil, err
	}
	p := PrincipalFrom(r.Context())
	if !p.Admin && k.TenantID != p.TenantID {
		return nil, NotFound("api key", id)
	}
	return k, nil
}

func (s *Server) getKey(w http.ResponseWriter, r *http.Request) {
	k, err := s.visibleKey(r, r.PathValue("id"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toKeyJSON(k))
}

func (s *Server) listKeys(w http.ResponseWriter, r *http.Request) {
	p := PrincipalFrom(r.Context())
	tenant := p.TenantID
	if p.Admin {
		tenant = r.URL.Query().Get("tenant_id") // "" = every tenant
	} else if t := r.URL.Query().Get("tenant_id"); t != "" && t != p.TenantID {
		s.writeError(w, r, BadRequest("query parameter \"tenant_id\": a tenant's key lists its own tenant's keys only"))
		return
	}
	keys, err := s.store.ListAPIKeys(r.Context(), tenant)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := listJSON[keyJSON]{Data: make([]keyJSON, 0, len(keys))}
	for _, k := range keys {
		out.Data = append(out.Data, toKeyJSON(k))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := s.visibleKey(r, id); err != nil {
		s.writeError(w, r, err)
		return
	}
	if id == PrincipalFrom(r.Context()).KeyID {
		s.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "refusing to revoke the key this request is using; revoke it with another admin key"))
		return
	}
	if err := s.store.RevokeAPIKey(r.Context(), id, time.Now().UTC()); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.keys.purge()
	k, err := s.store.GetAPIKey(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toKeyJSON(k))
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
