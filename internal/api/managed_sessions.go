package api

import (
	"errors"
	"net/http"
	"slices"
	"strconv"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/managed"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// status derives a session's status from the store's facts (seed 000).
func (m *managedAPI) status(r *http.Request, s *store.ManagedSession) (string, error) {
	rr, err := m.st.GetRunRow(r.Context(), s.ID)
	if errors.Is(err, store.ErrNotFound) {
		rr, err = nil, nil
	}
	if err != nil {
		return "", err
	}
	return session.DeriveStatus(s, rr), nil
}

func (m *managedAPI) writeSession(w http.ResponseWriter, r *http.Request, s *store.ManagedSession) {
	d, err := m.sessionDocFor(r, s)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	st, err := m.status(r, s)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, sessionJSON(s, d, st, m.now()))
}

func (m *managedAPI) createSession(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	ref, err := parseAgentRef(in)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	envID, err := in.ReqStr("environment_id")
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	agent, err := m.svc.Agent(r.Context(), tenant(r), ref.id, ref.version)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	if agent.ArchivedAt != nil {
		m.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "agent %q is archived; archived agents cannot start sessions (field \"agent\")", ref.id))
		return
	}
	env, err := m.environmentFor(r, envID)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	if env.ArchivedAt != nil {
		m.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "environment %q is archived; archived environments cannot start sessions (field \"environment_id\")", envID))
		return
	}
	snap, err := m.svc.SessionAgent(r.Context(), tenant(r), agent, ref.overrides)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	d := sessionDoc{Agent: snap}
	if err := firstErr(applySessionFields(in, &d, true), refuseSessionExtras(in), m.applyVaultIDs(r.Context(), in, &d, tenant(r))); err != nil {
		m.writeError(w, r, err)
		return
	}
	sessionID := ids.New("sesn")
	rs, err := m.buildSessionResources(r, in, sessionID)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	initial, err := in.Objects("initial_events")
	if err == nil && len(initial) > maxInitialEvents {
		err = BadRequest("field \"initial_events\" has %d events; the limit is %d", len(initial), maxInitialEvents)
	}
	var evs []store.NewEvent
	if err == nil {
		evs, err = m.buildEvents(r, "", initial, true)
	}
	if err == nil {
		err = in.Strict()
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	// The session, its resources and its initial events are one
	// transaction: a crash never leaves a session without what it was
	// created with.
	s, stored, rs, err := m.st.CreateManagedSessionWith(r.Context(), store.NewManagedSession{
		Session: store.ManagedSession{ID: sessionID, TenantID: tenant(r), AgentID: agent.ID, AgentVersion: agent.Version,
			EnvironmentID: env.ID, Doc: mustJSON(d)},
		Resources: rs, Events: evs,
	})
	if err != nil {
		m.writeError(w, r, inputErr(err))
		return
	}
	if len(rs) > 0 {
		list := make([]map[string]any, 0, len(rs))
		for _, x := range rs {
			list = append(list, resources.Render(x))
		}
		d.Resources = mustJSON(list)
	}
	if len(stored) > 0 {
		m.events.Publish(s.ID, stored)
		m.wake(s.ID)
	}
	writeJSON(w, http.StatusOK, sessionJSON(s, d, session.StatusIdle, m.now()))
}

// sessionDocFor is the session's doc with its resources as they are now.
func (m *managedAPI) sessionDocFor(r *http.Request, s *store.ManagedSession) (sessionDoc, error) {
	d, err := decodeSessionDoc(s.Doc)
	if err != nil {
		return d, err
	}
	list, err := m.sessionResourcesJSON(r, s.ID)
	if err != nil {
		return d, err
	}
	d.Resources = mustJSON(list)
	return d, nil
}

func (m *managedAPI) wake(sessionID string) {
	if m.runner != nil {
		m.runner.Wake(sessionID)
	}
}

// applySessionFields writes title and metadata from in onto d.
func applySessionFields(in obj, d *sessionDoc, create bool) error {
	if in.Has("title") {
		d.Title = nil
		if in.Set("title") {
			t, err := in.Str("title")
			if err == nil {
				err = in.LimitLen("title", t, maxSessionTitle)
			}
			if err != nil {
				return err
			}
			d.Title = &t
		}
	}
	if create || in.Has("metadata") {
		md, err := in.MetadataPatch("metadata", d.Metadata, false)
		if err != nil {
			return err
		}
		d.Metadata = md
	}
	return nil
}

func (m *managedAPI) getSession(w http.ResponseWriter, r *http.Request) {
	s, err := m.sessionFor(r, r.PathValue("id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	m.writeSession(w, r, s)
}

// writable refuses changes to an archived (read-only) or terminated
// session.
func writable(s *store.ManagedSession) error {
	switch {
	case s.TerminatedAt != nil:
		return Errorf(http.StatusConflict, TypeConflict, "session %q is terminated; it accepts no more changes or events", s.ID)
	case s.ArchivedAt != nil:
		return Errorf(http.StatusConflict, TypeConflict, "session %q is archived; it is read-only", s.ID)
	}
	return nil
}

// modifySession applies change to the current session with the store's
// compare-and-set, retrying when the runtime wrote in between.
func (m *managedAPI) modifySession(r *http.Request, id string, change func(*store.ManagedSession) error) (*store.ManagedSession, error) {
	for attempt := 0; ; attempt++ {
		s, err := m.sessionFor(r, id)
		if err != nil {
			return nil, err
		}
		if err := change(s); err != nil {
			return nil, err
		}
		out, err := m.st.UpdateManagedSession(r.Context(), s)
		if errors.Is(err, store.ErrVersionMismatch) && attempt < 10 {
			continue
		}
		return out, notFoundAs("session", id, err)
	}
}

func (m *managedAPI) updateSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	s, err := m.modifySession(r, id, func(s *store.ManagedSession) error {
		if err := writable(s); err != nil {
			return err
		}
		d, err := decodeSessionDoc(s.Doc)
		if err != nil {
			return err
		}
		if err := firstErr(applySessionFields(in, &d, false), refuseSessionExtras(in), m.applyVaultIDs(r.Context(), in, &d, s.TenantID)); err != nil {
			return err
		}
		if ag, ok, err := in.Object("agent"); err != nil {
			return err
		} else if ok {
			if err := m.updateSessionAgent(r, s, &d, ag); err != nil {
				return err
			}
		}
		if err := in.Strict(); err != nil {
			return err
		}
		s.Doc = mustJSON(d)
		return nil
	})
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	m.writeSession(w, r, s)
}

// updateSessionAgent replaces the snapshot's tools and mcp_servers (the
// only agent fields the SDK lets a session change), between turns only.
func (m *managedAPI) updateSessionAgent(r *http.Request, s *store.ManagedSession, d *sessionDoc, ag obj) error {
	for k := range ag.Map() {
		if k != "tools" && k != "mcp_servers" {
			return BadRequest("field %q cannot be updated on a session; only agent.tools and agent.mcp_servers can", ag.Field(k))
		}
	}
	if st, err := m.status(r, s); err != nil {
		return err
	} else if st != session.StatusIdle {
		return Errorf(http.StatusConflict, TypeConflict, "session %q is %s; update its agent while it is idle", s.ID, st)
	}
	snap, err := managed.UpdateSessionAgent(d.Agent, ag)
	if err != nil {
		return err
	}
	d.Agent = snap
	return nil
}

func (m *managedAPI) archiveSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	s, err := m.modifySession(r, id, func(s *store.ManagedSession) error {
		if s.ArchivedAt != nil {
			return nil
		}
		if st, err := m.status(r, s); err != nil {
			return err
		} else if st == session.StatusRunning || st == session.StatusRescheduling {
			return Errorf(http.StatusConflict, TypeConflict, "session %q is %s; send user.interrupt and archive it once it is idle", id, st)
		}
		now := m.now()
		s.ArchivedAt = &now
		return nil
	})
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	m.writeSession(w, r, s)
}

// deleteSession runs the destroy sequence through the runner, then deletes
// the session and its events, and ends its event streams.
func (m *managedAPI) deleteSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := m.sessionFor(r, id); err != nil {
		m.writeError(w, r, err)
		return
	}
	if m.runner != nil {
		if err := m.runner.Destroy(r.Context(), tenant(r), id); err != nil {
			m.writeError(w, r, notFoundAs("session", id, err))
			return
		}
	}
	if err := m.st.DeleteManagedSession(r.Context(), id); err != nil {
		m.writeError(w, r, notFoundAs("session", id, err))
		return
	}
	m.events.CloseSession(id)
	if m.resources != nil {
		if err := m.resources.Forget(id); err != nil {
			m.log.WarnContext(r.Context(), "session resources: remove the host tree", "session", id, "err", err)
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "type": "session_deleted"})
}

func (m *managedAPI) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := parsePageQuery(q, 20, 100, true)
	if err == nil {
		err = checkQuery(q, withCursor("include_archived", "agent_id", "agent_version", "statuses", "deployment_id", "memory_store_id")...)
	}
	if err == nil && q.Get("deployment_id") != "" {
		err = BadRequest("query parameter \"deployment_id\" is not supported yet: agentkernel has no deployments")
	}
	if err == nil && q.Get("memory_store_id") != "" {
		err = BadRequest("query parameter \"memory_store_id\" is not supported yet: agentkernel has no memory stores")
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	archived, err := queryBool(q, "include_archived")
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	var agentVersion int64
	if v := q.Get("agent_version"); v != "" {
		if agentVersion, err = strconv.ParseInt(v, 10, 64); err != nil || agentVersion < 1 {
			m.writeError(w, r, BadRequest("query parameter \"agent_version\" must be an integer of at least 1"))
			return
		}
	}
	statuses := queryList(q, "statuses")
	for _, st := range statuses {
		if !slices.Contains([]string{session.StatusIdle, session.StatusRunning, session.StatusRescheduling, session.StatusTerminated}, st) {
			m.writeError(w, r, BadRequest("query parameter \"statuses\": unknown status %q (want idle, running, rescheduling or terminated)", st))
			return
		}
	}
	runs, err := m.runRows(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	statusOf := func(s *store.ManagedSession) string { return session.DeriveStatus(s, runs[s.ID]) }
	page, more, err := collectPage(p.limit, p.cursor, func(after string, n int) ([]*store.ManagedSession, error) {
		lp := store.ListResourcesParams{TenantID: tenant(r), Limit: n, IncludeArchived: archived, Descending: p.desc, AgentID: q.Get("agent_id")}
		if p.desc {
			lp.BeforeID = after
		} else {
			lp.AfterID = after
		}
		return m.st.ListManagedSessions(r.Context(), lp)
	}, func(s *store.ManagedSession) string { return s.ID }, func(s *store.ManagedSession) bool {
		return p.inTime(s.CreatedAt) && (agentVersion == 0 || s.AgentVersion == agentVersion) &&
			(len(statuses) == 0 || slices.Contains(statuses, statusOf(s)))
	})
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	now := m.now()
	for _, s := range page {
		d, err := m.sessionDocFor(r, s)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		out = append(out, sessionJSON(s, d, statusOf(s), now))
	}
	writePage(w, out, more, func(v map[string]any) string { return v["id"].(string) })
}

// runRows indexes every run row by session: one read per listing instead
// of one per session.
func (m *managedAPI) runRows(r *http.Request) (map[string]*store.RunRow, error) {
	rows, err := m.st.ListRunRows(r.Context())
	if err != nil {
		return nil, err
	}
	out := make(map[string]*store.RunRow, len(rows))
	for _, rr := range rows {
		out[rr.SessionID] = rr
	}
	return out, nil
}
