package api

import (
	"errors"
	"net/http"
	"time"

	"github.com/agentkernel/agentkernel/internal/envwork"
	"github.com/agentkernel/agentkernel/internal/lineage"
	"github.com/agentkernel/agentkernel/internal/managed"
	"github.com/agentkernel/agentkernel/internal/memory"
	"github.com/agentkernel/agentkernel/internal/packages"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/skills"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/vault"
)

// SessionRunner runs the turns of Managed Agents sessions (see
// managed.Runner).
type SessionRunner = managed.Runner

// ManagedOptions enable the Managed Agents API (agents, environments,
// sessions, session events) under /v1, wire-compatible with
// anthropic-sdk-go's Beta client.
type ManagedOptions struct {
	Store  store.ManagedStore
	Events *session.EventLog
	Runner SessionRunner
	// MaxEventBytes limits one sent event's JSON (413 beyond; default
	// 256 KiB). Bodies are limited by server.max_body_bytes as well.
	MaxEventBytes int
	// SandboxNetwork is the daemon's sandbox network ([sandbox] network:
	// none, egress or host; "" is egress): the ceiling of what an
	// environment's networking may allow.
	SandboxNetwork string
	// Vaults serves /v1/vaults when set (the store must hold vaults too);
	// without it a session's vault_ids are refused.
	Vaults *vault.Service
	// Memory serves /v1/memory_stores when set.
	Memory *memory.Service
	// Skills serves /v1/skills when set; without it an agent's skills are
	// refused.
	Skills *skills.Service
	// Packages builds environments' config.packages; nil refuses them.
	Packages *packages.Service
	// Resources serves sessions' resources when set (the store must hold
	// them too); without it `resources` is refused.
	Resources *resources.Service
	// Lineage serves fork, rewind, branches and history when set.
	Lineage *lineage.Service
	// Work serves the work queue of self_hosted environments when set;
	// without it a self_hosted environment is refused.
	Work *envwork.Queue
}

// managedAPI holds the Managed Agents handlers' dependencies.
type managedAPI struct {
	*Server
	st        store.ManagedStore
	events    *session.EventLog  // event lists and streams
	resources *resources.Service // nil: a session's resources are refused
	// svc is the domain: agents, environments and sessions.
	svc *managed.Service
}

func (s *Server) registerManagedRoutes(o *ManagedOptions) {
	m := &managedAPI{Server: s, st: o.Store, events: o.Events, resources: o.Resources,
		svc: managed.New(managed.Options{Store: o.Store, Skills: o.Skills, Packages: o.Packages, Sandboxes: s.sandboxes,
			SandboxNetwork: o.SandboxNetwork, Vaults: o.Vaults, Resources: o.Resources, MaxEventBytes: o.MaxEventBytes,
			Events: o.Events, Runner: o.Runner, Work: workQueue(o.Work), Log: s.log})}
	a := s.authenticated
	oa := func(h http.HandlerFunc) http.HandlerFunc { return a(s.sessionOwner(h)) }
	s.mux.HandleFunc("POST /v1/agents", a(s.noQuery(m.createAgent)))
	s.mux.HandleFunc("GET /v1/agents", a(m.listAgents))
	s.mux.HandleFunc("GET /v1/agents/{id}", a(m.getAgent))
	s.mux.HandleFunc("POST /v1/agents/{id}", a(s.noQuery(m.updateAgent)))
	s.mux.HandleFunc("GET /v1/agents/{id}/versions", a(m.listAgentVersions))
	s.mux.HandleFunc("POST /v1/agents/{id}/archive", a(s.noQuery(m.archiveAgent)))

	s.mux.HandleFunc("POST /v1/environments", a(s.noQuery(m.createEnvironment)))
	s.mux.HandleFunc("GET /v1/environments", a(m.listEnvironments))
	s.mux.HandleFunc("GET /v1/environments/{id}", a(s.noQuery(m.getEnvironment)))
	s.mux.HandleFunc("POST /v1/environments/{id}", a(s.noQuery(m.updateEnvironment)))
	s.mux.HandleFunc("DELETE /v1/environments/{id}", a(s.noQuery(m.deleteEnvironment)))
	s.mux.HandleFunc("POST /v1/environments/{id}/archive", a(s.noQuery(m.archiveEnvironment)))

	s.mux.HandleFunc("POST /v1/sessions", a(s.noQuery(m.createSession)))
	s.mux.HandleFunc("GET /v1/sessions", a(m.listSessions))
	// A self_hosted environment's worker reads its sessions and their
	// events and sends its tool results with the environment's key.
	e := s.envAuthenticated
	oe := func(h http.HandlerFunc) http.HandlerFunc { return e(s.sessionOwner(h)) }
	s.mux.HandleFunc("GET /v1/sessions/{id}", oe(s.noQuery(m.getSession)))
	s.mux.HandleFunc("POST /v1/sessions/{id}", oa(s.noQuery(m.updateSession)))
	s.mux.HandleFunc("DELETE /v1/sessions/{id}", oa(s.noQuery(m.deleteSession)))
	s.mux.HandleFunc("POST /v1/sessions/{id}/archive", oa(s.noQuery(m.archiveSession)))

	s.mux.HandleFunc("GET /v1/sessions/{id}/events", oe(m.listEvents))
	s.mux.HandleFunc("POST /v1/sessions/{id}/events", oe(s.noQuery(m.sendEvents)))
	s.mux.HandleFunc("GET /v1/sessions/{id}/events/stream", oe(m.streamEvents))
	s.mux.HandleFunc("GET /v1/sessions/{id}/events/{event_id}", oe(s.noQuery(m.getEvent)))
	s.registerThreadRoutes(m)

	if o.Resources != nil {
		s.registerResourceRoutes(m)
	}
	if m.svc.HasDeployments() {
		s.registerDeploymentRoutes(m)
	}
	s.managedSvc = m.svc
	if o.Lineage != nil {
		s.registerLineageRoutes(m, o.Lineage)
	}
	if o.Work != nil {
		s.registerWorkRoutes(m, o.Work)
	}
	if vst, ok := o.Store.(store.VaultStore); ok && o.Vaults != nil {
		s.registerVaultRoutes(m, vst, o.Vaults)
	}
	if o.Memory != nil {
		s.registerMemoryRoutes(m, o.Memory)
	}
	if o.Skills != nil {
		s.skillUploads = o.Skills.Limits().UploadBytes
		s.registerSkillRoutes(m, o.Skills)
	}
}

func (m *managedAPI) now() time.Time { return time.Now().UTC() }

// tenant is the caller's tenant; every managed resource is scoped to it.
func tenant(r *http.Request) string { return PrincipalFrom(r.Context()).TenantID }

// notFoundAs turns the store's ErrNotFound into a 404 naming the resource.
func notFoundAs(kind, id string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return NotFound(kind, id)
	}
	return err
}

// sessionFor reads a session the caller's tenant owns (with an
// environment key: a session of the key's environment).
func (m *managedAPI) sessionFor(r *http.Request, id string) (*store.ManagedSession, error) {
	s, err := m.svc.Session(r.Context(), tenant(r), id)
	if err != nil {
		return nil, err
	}
	if env := PrincipalFrom(r.Context()).EnvironmentID; env != "" && s.EnvironmentID != env {
		return nil, NotFound("session", id)
	}
	return s, nil
}

// envScoped: with an environment key, the session must be one of the
// key's environment (else 404, as for another tenant's).
func (m *managedAPI) envScoped(r *http.Request, id string) error {
	if PrincipalFrom(r.Context()).EnvironmentID == "" {
		return nil
	}
	_, err := m.sessionFor(r, id)
	return err
}

// writeError writes the envelope; conflicts here are never transient (an
// archived resource, a stale version, a terminated session), so it tells
// the official SDKs, which retry 409 by default, not to.
func (m *managedAPI) writeError(w http.ResponseWriter, r *http.Request, err error) {
	err = managedErr(err)
	var e *Error
	if (errors.As(err, &e) && e.Status == http.StatusConflict) ||
		errors.Is(err, store.ErrVersionMismatch) || errors.Is(err, store.ErrConflict) {
		w.Header().Set("x-should-retry", "false")
	}
	m.Server.writeError(w, r, err)
}

// workQueue is q as the service's interface: nil stays a nil interface.
func workQueue(q *envwork.Queue) session.WorkQueue {
	if q == nil {
		return nil
	}
	return q
}
