package api

import (
	"context"
	"errors"
	"net/http"
	"strings"

	"github.com/agentkernel/agentkernel/internal/auth"
)

// Principal is who is calling: the key and its tenant.
type Principal struct {
	KeyID    string
	TenantID string
	Admin    bool
	// EnvironmentID: an environment key, which reaches only the routes
	// registered with envAuthenticated, for that environment's work queue
	// and its sessions.
	EnvironmentID string
}

// PrincipalFrom returns the authenticated caller of a request.
func PrincipalFrom(ctx context.Context) Principal {
	p, _ := ctx.Value(ctxPrincipal).(Principal)
	return p
}

// keyFromRequest reads x-api-key or Authorization: Bearer.
func keyFromRequest(r *http.Request) string {
	if k := strings.TrimSpace(r.Header.Get("x-api-key")); k != "" {
		return k
	}
	if h := r.Header.Get("Authorization"); h != "" {
		if scheme, tok, ok := strings.Cut(h, " "); ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(tok)
		}
	}
	return ""
}

// authenticated wraps h so it runs only with a valid, unrevoked tenant
// key: an environment key is refused.
func (s *Server) authenticated(h http.HandlerFunc) http.HandlerFunc { return s.withKey(h, false) }

// envAuthenticated is authenticated, also for an environment key: the
// routes a self_hosted environment's worker calls. The handler checks that
// what it serves belongs to the key's environment.
func (s *Server) envAuthenticated(h http.HandlerFunc) http.HandlerFunc { return s.withKey(h, true) }

func (s *Server) withKey(h http.HandlerFunc, envKeys bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		secret := keyFromRequest(r)
		if secret == "" {
			s.writeError(w, r, Errorf(http.StatusUnauthorized, TypeAuthentication,
				"missing API key: send it in the x-api-key header or as Authorization: Bearer <key>"))
			return
		}
		p, err := s.keys.lookup(r.Context(), s.store, auth.Hash(secret))
		if errors.Is(err, errInvalidKey) {
			s.writeError(w, r, Errorf(http.StatusUnauthorized, TypeAuthentication, "invalid API key"))
			return
		}
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if p.EnvironmentID != "" && !envKeys {
			s.writeError(w, r, Errorf(http.StatusForbidden, TypePermission,
				"this is an environment key (of %s): it reaches that environment's work queue and its sessions' events only; use a tenant key", p.EnvironmentID))
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxPrincipal, p)))
	}
}

// adminOnly wraps an authenticated handler so only admin keys reach it.
func (s *Server) adminOnly(h http.HandlerFunc) http.HandlerFunc {
	return s.authenticated(func(w http.ResponseWriter, r *http.Request) {
		if !PrincipalFrom(r.Context()).Admin {
			s.writeError(w, r, Errorf(http.StatusForbidden, TypePermission, "this endpoint needs an admin API key"))
			return
		}
		h(w, r)
	})
}

// ErrInvalidKey: Authenticate was given no key, an unknown one or a
// revoked one.
var ErrInvalidKey = errInvalidKey

// Authenticate returns the principal of an API key's secret, as every
// route sees it: what the web console checks at login.
func (s *Server) Authenticate(ctx context.Context, secret string) (Principal, error) {
	if secret == "" {
		return Principal{}, errInvalidKey
	}
	return s.keys.lookup(ctx, s.store, auth.Hash(secret))
}
