package api

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/agentkernel/agentkernel/internal/managed"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

func (m *managedAPI) createSession(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out, err := m.svc.CreateSession(r.Context(), tenant(r), in)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) getSession(w http.ResponseWriter, r *http.Request) {
	if err := m.envScoped(r, r.PathValue("id")); err != nil {
		m.writeError(w, r, err)
		return
	}
	out, err := m.svc.GetSession(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) updateSession(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out, err := m.svc.UpdateSession(r.Context(), tenant(r), r.PathValue("id"), in)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) archiveSession(w http.ResponseWriter, r *http.Request) {
	out, err := m.svc.ArchiveSession(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) deleteSession(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := m.svc.DeleteSession(r.Context(), tenant(r), id); err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "type": "session_deleted"})
}

func (m *managedAPI) listSessions(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := parsePageQuery(q, 20, 100, true)
	if err == nil {
		err = checkQuery(q, withCursor("include_archived", "agent_id", "agent_version", "statuses", "deployment_id", "memory_store_id")...)
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
	list, err := m.svc.Sessions(r.Context(), tenant(r))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	page, more, err := collectPage(p.limit, p.cursor, func(after string, n int) ([]*store.ManagedSession, error) {
		lp := store.ListResourcesParams{Limit: n, IncludeArchived: archived, Descending: p.desc, AgentID: q.Get("agent_id")}
		if p.desc {
			lp.BeforeID = after
		} else {
			lp.AfterID = after
		}
		return list.Page(r.Context(), lp)
	}, func(s *store.ManagedSession) string { return s.ID }, func(s *store.ManagedSession) bool {
		return p.inTime(s.CreatedAt) && (agentVersion == 0 || s.AgentVersion == agentVersion) &&
			(len(statuses) == 0 || slices.Contains(statuses, list.Status(s))) &&
			(q.Get("deployment_id") == "" || managed.SessionDeploymentID(s) == q.Get("deployment_id"))
	})
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out, err := list.JSON(r.Context(), page)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writePage(w, out, more, func(v map[string]any) string { return v["id"].(string) })
}
