package api

import (
	"bytes"
	"errors"
	"net/http"
	"strconv"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

func (m *managed) writeAgent(w http.ResponseWriter, r *http.Request, status int, a *store.Agent) {
	d, err := decodeAgentDoc(a.Doc)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, status, toAgentJSON(a, d))
}

func toAgentJSON(a *store.Agent, d agentDoc) map[string]any {
	var archived any
	if a.ArchivedAt != nil {
		archived = a.ArchivedAt.UTC()
	}
	return agentJSON(a.ID, a.Version, d, a.CreatedAt.UTC(), a.UpdatedAt.UTC(), archived)
}

func (m *managed) createAgent(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	d := newAgentDoc()
	if err := firstErr(applyAgentFields(in, &d, true, m.skillsFor(r)), in.strict()); err != nil {
		m.writeError(w, r, err)
		return
	}
	a, err := m.st.CreateAgent(r.Context(), &store.Agent{ID: ids.New("agent"), TenantID: tenant(r), Doc: mustJSON(d)})
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toAgentJSON(a, d))
}

func (m *managed) getAgent(w http.ResponseWriter, r *http.Request) {
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
	a, err := m.agentFor(r, r.PathValue("id"), version)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	m.writeAgent(w, r, http.StatusOK, a)
}

// updateAgent writes a new version. With "version" in the body the update
// applies only if it is still the current version (409 otherwise);
// without it the update applies to whatever is current. An update that
// changes nothing creates no version.
func (m *managed) updateAgent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	expected, pinned, err := in.int("version")
	if err == nil && pinned && expected < 1 {
		err = BadRequest("field \"version\" must be at least 1")
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	for attempt := 0; ; attempt++ {
		cur, err := m.agentFor(r, id, 0)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		if cur.ArchivedAt != nil {
			m.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "agent %q is archived; archived agents cannot be updated", id))
			return
		}
		if pinned && cur.Version != expected {
			m.writeError(w, r, Errorf(http.StatusConflict, TypeConflict,
				"agent %q is at version %d, not %d (field \"version\"); retrieve it and apply your change again", id, cur.Version, expected))
			return
		}
		d, err := decodeAgentDoc(cur.Doc)
		if err == nil {
			err = applyAgentFields(in, &d, false, m.skillsFor(r))
		}
		if err == nil {
			err = in.strict()
		}
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		doc := mustJSON(d)
		if bytes.Equal(doc, mustJSON(mustDecodeAgent(cur.Doc))) {
			writeJSON(w, http.StatusOK, toAgentJSON(cur, d))
			return
		}
		a, err := m.st.UpdateAgent(r.Context(), id, cur.Version, doc)
		if errors.Is(err, store.ErrVersionMismatch) && !pinned && attempt < 5 {
			continue // a concurrent update won; apply ours to the new version
		}
		if errors.Is(err, store.ErrVersionMismatch) {
			err = Errorf(http.StatusConflict, TypeConflict, "agent %q was updated concurrently; retrieve it and apply your change again", id)
		}
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		writeJSON(w, http.StatusOK, toAgentJSON(a, d))
		return
	}
}

// mustDecodeAgent normalizes a stored doc for comparison.
func mustDecodeAgent(b []byte) agentDoc {
	d, _ := decodeAgentDoc(b)
	return d
}

func (m *managed) archiveAgent(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := m.agentFor(r, id, 0); err != nil {
		m.writeError(w, r, err)
		return
	}
	a, err := m.st.ArchiveAgent(r.Context(), id, m.now())
	if err != nil {
		m.writeError(w, r, notFoundAs("agent", id, err))
		return
	}
	m.writeAgent(w, r, http.StatusOK, a)
}

func (m *managed) listAgents(w http.ResponseWriter, r *http.Request) {
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
		lp := store.ListResourcesParams{TenantID: tenant(r), Limit: n, IncludeArchived: archived, Descending: p.desc}
		if p.desc {
			lp.BeforeID = after
		} else {
			lp.AfterID = after
		}
		return m.st.ListAgents(r.Context(), lp)
	}, func(a *store.Agent) string { return a.ID }, func(a *store.Agent) bool { return p.inTime(a.CreatedAt) })
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, a := range page {
		d, err := decodeAgentDoc(a.Doc)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		out = append(out, toAgentJSON(a, d))
	}
	writePage(w, out, more, func(v map[string]any) string { return v["id"].(string) })
}

// listAgentVersions pages through every version, newest first.
func (m *managed) listAgentVersions(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	// Versions are listed newest first, with no filters.
	p, err := parsePageQuery(r.URL.Query(), 20, 100, true)
	if err == nil {
		err = checkQuery(r.URL.Query(), "limit", "page")
	}
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	if _, err := m.agentFor(r, id, 0); err != nil {
		m.writeError(w, r, err)
		return
	}
	versions, err := m.st.ListAgentVersions(r.Context(), id)
	if err != nil {
		m.writeError(w, r, notFoundAs("agent", id, err))
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
		d, err := decodeAgentDoc(a.Doc)
		if err != nil {
			m.writeError(w, r, err)
			return
		}
		out = append(out, toAgentJSON(a, d))
	}
	writePage(w, out, more, func(v map[string]any) string { return strconv.FormatInt(v["version"].(int64), 10) })
}
