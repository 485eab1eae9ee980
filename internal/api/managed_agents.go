package api

import (
	"net/http"
	"strconv"

	"github.com/agentkernel/agentkernel/internal/managed"
	"github.com/agentkernel/agentkernel/internal/store"
)

func (m *managedAPI) createAgent(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out, err := m.svc.CreateAgent(r.Context(), tenant(r), in)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) getAgent(w http.ResponseWriter, r *http.Request) {
	if err := checkQuery(r.URL.Query(), "version"); err != nil {
		m.writeError(w, r, err)
		return
	}
	var version int64
	if v := r.URL.Query().Get("version"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 1 {
			m.writeError(w, r, BadRequest("query parameter \"version\" must be an integer of at least 1"))
			return
		}
		version = n
	}
	out, err := m.svc.GetAgent(r.Context(), tenant(r), r.PathValue("id"), version)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

// updateAgent writes a new version (managed.Service.UpdateAgent).
func (m *managedAPI) updateAgent(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out, err := m.svc.UpdateAgent(r.Context(), tenant(r), r.PathValue("id"), in)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) archiveAgent(w http.ResponseWriter, r *http.Request) {
	out, err := m.svc.ArchiveAgent(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) listAgents(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := parsePageQuery(q, 20, 100, false)
	if err == nil {
		err = checkQuery(q, withCursor("include_archived")...)
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
	page, more, err := collectPage(p.limit, p.cursor, func(after string, n int) ([]*store.Agent, error) {
		lp := store.ListResourcesParams{Limit: n, IncludeArchived: archived, Descending: p.desc}
		if p.desc {
			lp.BeforeID = after
		} else {
			lp.AfterID = after
		}
		return m.svc.ListAgents(r.Context(), tenant(r), lp)
	}, func(a *store.Agent) string { return a.ID }, func(a *store.Agent) bool { return p.inTime(a.CreatedAt) })
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, a := range page {
		v, err := managed.AgentJSON(a)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		out = append(out, v)
	}
	writePage(w, out, more, func(v map[string]any) string { return v["id"].(string) })
}

// listAgentVersions pages through every version, newest first.
func (m *managedAPI) listAgentVersions(w http.ResponseWriter, r *http.Request) {
	// Versions are listed newest first, with no filters.
	p, err := parsePageQuery(r.URL.Query(), 20, 100, true)
	if err == nil {
		err = checkQuery(r.URL.Query(), "limit", "page")
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	versions, err := m.svc.AgentVersions(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	var after int64 = -1
	if p.cursor != "" {
		if after, err = strconv.ParseInt(p.cursor, 10, 64); err != nil {
			m.writeError(w, r, BadRequest("query parameter \"page\" is not a cursor for agent versions"))
			return
		}
	}
	out := []map[string]any{}
	more := false
	for _, a := range versions {
		if after >= 0 && a.Version >= after {
			continue
		}
		if len(out) == p.limit {
			more = true
			break
		}
		v, err := managed.AgentJSON(a)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		out = append(out, v)
	}
	writePage(w, out, more, func(v map[string]any) string { return strconv.FormatInt(v["version"].(int64), 10) })
}
