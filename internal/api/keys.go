package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/agentkernel/agentkernel/internal/auth"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

type keyJSON struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	TenantID string `json:"tenant_id"`
	Name     string `json:"name"`
	Prefix   string `json:"prefix"`
	Admin    bool   `json:"admin"`
	// EnvironmentID: an environment key (null for a tenant key).
	EnvironmentID *string    `json:"environment_id"`
	CreatedAt     time.Time  `json:"created_at"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	Secret        string     `json:"secret,omitempty"`
}

func toKeyJSON(k *store.APIKey) keyJSON {
	out := keyJSON{ID: k.ID, Type: "api_key", TenantID: k.TenantID, Name: k.Name, Prefix: k.Prefix,
		Admin: k.Admin, CreatedAt: k.CreatedAt, RevokedAt: k.RevokedAt}
	if k.EnvironmentID != "" {
		out.EnvironmentID = &k.EnvironmentID
	}
	return out
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
	// EnvironmentID makes an environment key: the credential of a
	// self_hosted environment's workers (issue 16).
	EnvironmentID string `json:"environment_id"`
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
	p := PrincipalFrom(r.Context())
	if in.TenantID == "" {
		in.TenantID = p.TenantID
	}
	if !p.Admin {
		// A tenant key makes environment keys of its own tenant only.
		switch {
		case in.EnvironmentID == "":
			s.writeError(w, r, Errorf(http.StatusForbidden, TypePermission, "a tenant key creates environment keys only (set environment_id); other keys need an admin key"))
			return
		case in.TenantID != p.TenantID:
			s.writeError(w, r, NotFound("tenant", in.TenantID))
			return
		}
	}
	if in.EnvironmentID != "" {
		if in.Admin {
			s.writeError(w, r, BadRequest("fields \"admin\" and \"environment_id\": an environment key cannot be an admin key"))
			return
		}
		if err := s.checkKeyEnvironment(r, in.TenantID, in.EnvironmentID); err != nil {
			s.writeError(w, r, err)
			return
		}
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
		Prefix: auth.Prefix(secret), Hash: auth.Hash(secret), Admin: in.Admin, EnvironmentID: in.EnvironmentID,
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

// checkKeyEnvironment: an environment key is made for a self_hosted
// environment of its tenant.
func (s *Server) checkKeyEnvironment(r *http.Request, tenantID, envID string) error {
	env, err := s.store.GetEnvironment(r.Context(), envID)
	if errors.Is(err, store.ErrNotFound) || (err == nil && env.TenantID != tenantID) {
		return Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field \"environment_id\": environment %q does not exist in tenant %q", envID, tenantID)
	}
	if err != nil {
		return err
	}
	if !session.SelfHosted(env) {
		return Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field \"environment_id\": environment %s is not self_hosted: only a self_hosted environment has a work queue for workers to poll", envID)
	}
	if env.ArchivedAt != nil {
		return Errorf(http.StatusUnprocessableEntity, TypeInvalidRequest, "field \"environment_id\": environment %s is archived", envID)
	}
	return nil
}

func (s *Server) revokeKey(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	k, err := s.visibleKey(r, id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if p := PrincipalFrom(r.Context()); !p.Admin && k.EnvironmentID == "" {
		s.writeError(w, r, Errorf(http.StatusForbidden, TypePermission, "a tenant key revokes its tenant's environment keys only; this key needs an admin key"))
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
	k, err = s.store.GetAPIKey(r.Context(), id)
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
