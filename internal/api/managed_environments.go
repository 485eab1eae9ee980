package api

import (
	"net/http"

	"github.com/agentkernel/agentkernel/internal/store"
)

func (m *managedAPI) createEnvironment(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out, err := m.svc.CreateEnvironment(r.Context(), tenant(r), in)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) getEnvironment(w http.ResponseWriter, r *http.Request) {
	out, err := m.svc.GetEnvironment(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) updateEnvironment(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out, err := m.svc.UpdateEnvironment(r.Context(), tenant(r), r.PathValue("id"), in)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) archiveEnvironment(w http.ResponseWriter, r *http.Request) {
	out, err := m.svc.ArchiveEnvironment(r.Context(), tenant(r), r.PathValue("id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) deleteEnvironment(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := m.svc.DeleteEnvironment(r.Context(), tenant(r), id); err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "type": "environment_deleted"})
}

func (m *managedAPI) listEnvironments(w http.ResponseWriter, r *http.Request) {
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
	page, more, err := collectPage(p.limit, p.cursor, func(after string, n int) ([]*store.Environment, error) {
		lp := store.ListResourcesParams{Limit: n, IncludeArchived: archived, Descending: p.desc}
		if p.desc {
			lp.BeforeID = after
		} else {
			lp.AfterID = after
		}
		return m.svc.ListEnvironments(r.Context(), tenant(r), lp)
	}, func(e *store.Environment) string { return e.ID }, func(e *store.Environment) bool { return p.inTime(e.CreatedAt) })
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, e := range page {
		v, err := m.svc.EnvironmentJSON(r.Context(), e)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		out = append(out, v)
	}
	writePage(w, out, more, func(v map[string]any) string { return v["id"].(string) })
}
