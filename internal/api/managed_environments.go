package api

import (
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// envDoc is an environment's stored body in the SDK's response shape
// (anthropic.BetaEnvironment without id, type and timestamps). Metadata
// keys agentkernel.driver, agentkernel.image, agentkernel.sleep_after, …
// override the [sandbox] defaults for sessions in this environment; the
// runtime reads them.
type envDoc struct {
	Name        string            `json:"name"`
	Description *string           `json:"description"`
	Config      json.RawMessage   `json:"config"`
	Metadata    map[string]string `json:"metadata"`
	Scope       string            `json:"scope"`
}

const (
	maxEnvName        = 256
	maxEnvDescription = 2048
)

func (m *managedAPI) writeEnvironment(w http.ResponseWriter, r *http.Request, e *store.Environment) {
	var d envDoc
	if err := json.Unmarshal(e.Doc, &d); err != nil {
		m.writeError(w, r, err)
		return
	}
	m.writeEnvJSON(w, r, e, d, false)
}

// writeEnvJSON writes the environment with its package build (start: begin
// the build if there is none).
func (m *managedAPI) writeEnvJSON(w http.ResponseWriter, r *http.Request, e *store.Environment, d envDoc, start bool) {
	out := m.toEnvJSON(e, d)
	b, err := m.envBuild(r.Context(), e, d, start)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out["packages_build"] = b
	writeJSON(w, http.StatusOK, out)
}

func (m *managedAPI) toEnvJSON(e *store.Environment, d envDoc) map[string]any {
	var archived any
	if e.ArchivedAt != nil {
		archived = e.ArchivedAt.UTC().Format(time.RFC3339Nano)
	}
	scope := d.Scope
	if scope == "" {
		scope = "organization"
	}
	return map[string]any{
		"id": e.ID, "type": "environment", "name": d.Name, "description": d.Description,
		"config": m.envConfigJSON(d), "metadata": orEmptyMap(d.Metadata), "scope": scope,
		"created_at": e.CreatedAt.UTC().Format(time.RFC3339Nano), "updated_at": e.UpdatedAt.UTC().Format(time.RFC3339Nano),
		"archived_at": archived,
	}
}

// applyEnvFields writes the fields present in in onto d.
func (m *managedAPI) applyEnvFields(in obj, d *envDoc, create bool) error {
	if create || in.Has("name") {
		name, err := in.ReqStr("name")
		if err == nil {
			err = in.LimitLen("name", name, maxEnvName)
		}
		if err != nil {
			return err
		}
		d.Name = name
	}
	if in.Has("description") {
		d.Description = nil
		if in.Set("description") {
			v, err := in.Str("description")
			if err == nil {
				err = in.LimitLen("description", v, maxEnvDescription)
			}
			if err != nil {
				return err
			}
			d.Description = &v
		}
	}
	if in.Has("scope") {
		scope, err := in.Str("scope")
		if err != nil {
			return err
		}
		switch scope {
		case "", "organization":
		case "account":
			return in.NotYet("scope", "an environment is visible to every key of its tenant (scope organization)")
		default:
			return BadRequest("field \"scope\" must be organization or account")
		}
		d.Scope = scope
	}
	if in.Has("metadata") {
		// For environments an empty string deletes a key too (SDK docs).
		md, err := in.MetadataPatch("metadata", d.Metadata, !create)
		if err != nil {
			return err
		}
		if err := m.checkSandboxMetadata(md); err != nil {
			return err
		}
		d.Metadata = md
	}
	// After metadata: the networking a config may state is the one the
	// environment's metadata gives its sandboxes.
	if in.Has("config") {
		if err := m.checkEnvConfig(in, d); err != nil {
			return err
		}
	}
	if len(d.Config) == 0 {
		d.Config = json.RawMessage(`{"type":"cloud"}`)
	}
	return nil
}

// checkSandboxMetadata validates the agentkernel.* keys with the parser
// the runtime uses, and their limits against the operator's policy, so a
// typo or an impossible limit fails here and not at the first tool call.
// An unknown agentkernel.* key is refused: stored, it would do nothing.
func (m *managedAPI) checkSandboxMetadata(md map[string]string) error {
	es, err := session.ParseSandboxMetadata(md)
	var me *session.MetadataError
	if errors.As(err, &me) {
		return BadRequest("field \"metadata.%s\" = %q: %s", me.Key, me.Value, me.Reason)
	}
	if err != nil {
		return err
	}
	if m.sandboxes != nil {
		var le *sandbox.LimitError
		if _, err := m.sandboxes.ResolveLimits(es.Limits); errors.As(err, &le) {
			return BadRequest("field %q = %s: %s", "metadata."+session.MetaPrefix+le.Field, le.Value, le.Reason)
		} else if err != nil {
			return err
		}
		if es.Network == sandbox.NetworkEgress && m.sandboxNetwork != "" && m.sandboxNetwork != sandbox.NetworkEgress {
			return BadRequest("field %q = %q: this daemon runs no egress proxy ([sandbox] network = %q)", "metadata."+session.MetaNetwork, es.Network, m.sandboxNetwork)
		}
		if es.Network == sandbox.NetworkHost && !m.sandboxes.HostNetworkAllowed() {
			return BadRequest("field %q = %q: the host's network reaches everything the host does (the daemon's API on loopback included) and the operator does not allow it ([sandbox] allow_host_network)", "metadata."+session.MetaNetwork, es.Network)
		}
	}
	return nil
}

func (m *managedAPI) createEnvironment(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	d := envDoc{Metadata: map[string]string{}}
	if err := firstErr(m.applyEnvFields(in, &d, true), in.Strict()); err != nil {
		m.writeError(w, r, err)
		return
	}
	e, err := m.st.CreateEnvironment(r.Context(), &store.Environment{ID: ids.New("env"), TenantID: tenant(r), Doc: mustJSON(d)})
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	m.writeEnvJSON(w, r, e, d, true)
}

func (m *managedAPI) getEnvironment(w http.ResponseWriter, r *http.Request) {
	e, err := m.environmentFor(r, r.PathValue("id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	m.writeEnvironment(w, r, e)
}

func (m *managedAPI) updateEnvironment(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	cur, err := m.environmentFor(r, id)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	if cur.ArchivedAt != nil {
		m.writeError(w, r, Errorf(http.StatusConflict, TypeConflict, "environment %q is archived; archived environments cannot be updated", id))
		return
	}
	var d envDoc
	if err := json.Unmarshal(cur.Doc, &d); err != nil {
		m.writeError(w, r, err)
		return
	}
	if err := firstErr(m.applyEnvFields(in, &d, false), in.Strict()); err != nil {
		m.writeError(w, r, err)
		return
	}
	e, err := m.st.UpdateEnvironment(r.Context(), id, mustJSON(d))
	if err != nil {
		m.writeError(w, r, notFoundAs("environment", id, err))
		return
	}
	m.writeEnvJSON(w, r, e, d, true)
}

func (m *managedAPI) archiveEnvironment(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := m.environmentFor(r, id); err != nil {
		m.writeError(w, r, err)
		return
	}
	e, err := m.st.ArchiveEnvironment(r.Context(), id, m.now())
	if err != nil {
		m.writeError(w, r, notFoundAs("environment", id, err))
		return
	}
	m.writeEnvironment(w, r, e)
}

func (m *managedAPI) deleteEnvironment(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if _, err := m.environmentFor(r, id); err != nil {
		m.writeError(w, r, err)
		return
	}
	if err := m.st.DeleteEnvironment(r.Context(), id); err != nil {
		m.writeError(w, r, notFoundAs("environment", id, err))
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
		lp := store.ListResourcesParams{TenantID: tenant(r), Limit: n, IncludeArchived: archived, Descending: p.desc}
		if p.desc {
			lp.BeforeID = after
		} else {
			lp.AfterID = after
		}
		return m.st.ListEnvironments(r.Context(), lp)
	}, func(e *store.Environment) string { return e.ID }, func(e *store.Environment) bool { return p.inTime(e.CreatedAt) })
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	out := make([]map[string]any, 0, len(page))
	for _, e := range page {
		var d envDoc
		if err := json.Unmarshal(e.Doc, &d); err != nil {
			m.writeError(w, r, err)
			return
		}
		v := m.toEnvJSON(e, d)
		if v["packages_build"], err = m.envBuild(r.Context(), e, d, false); err != nil {
			m.writeError(w, r, err)
			return
		}
		out = append(out, v)
	}
	writePage(w, out, more, func(v map[string]any) string { return v["id"].(string) })
}
