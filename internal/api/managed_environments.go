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

func (m *managed) writeEnvironment(w http.ResponseWriter, r *http.Request, e *store.Environment) {
	var d envDoc
	if err := json.Unmarshal(e.Doc, &d); err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toEnvJSON(e, d))
}

func toEnvJSON(e *store.Environment, d envDoc) map[string]any {
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
		"config": orDefault(d.Config, defaultCloudConfig()), "metadata": orEmptyMap(d.Metadata), "scope": scope,
		"created_at": e.CreatedAt.UTC().Format(time.RFC3339Nano), "updated_at": e.UpdatedAt.UTC().Format(time.RFC3339Nano),
		"archived_at": archived,
	}
}

func defaultCloudConfig() json.RawMessage {
	return json.RawMessage(`{"type":"cloud","networking":{"type":"unrestricted"},"packages":{"type":"packages","apt":[],"cargo":[],"gem":[],"go":[],"npm":[],"pip":[]}}`)
}

// applyEnvFields writes the fields present in in onto d.
func (m *managed) applyEnvFields(in obj, d *envDoc, create bool) error {
	if create || in.has("name") {
		name, err := in.reqStr("name")
		if err == nil {
			err = in.limitLen("name", name, maxEnvName)
		}
		if err != nil {
			return err
		}
		d.Name = name
	}
	if in.has("description") {
		d.Description = nil
		if in.set("description") {
			v, err := in.str("description")
			if err == nil {
				err = in.limitLen("description", v, maxEnvDescription)
			}
			if err != nil {
				return err
			}
			d.Description = &v
		}
	}
	if in.has("scope") {
		scope, err := in.str("scope")
		if err != nil {
			return err
		}
		if scope != "" && scope != "organization" && scope != "account" {
			return BadRequest("field \"scope\" must be organization or account")
		}
		d.Scope = scope
	}
	if create || in.has("config") {
		cfg, err := normalizeEnvConfig(in, d.Config)
		if err != nil {
			return err
		}
		d.Config = cfg
	}
	if in.has("metadata") {
		// For environments an empty string deletes a key too (SDK docs).
		md, err := in.metadataPatch("metadata", d.Metadata, !create)
		if err != nil {
			return err
		}
		if err := m.checkSandboxMetadata(md); err != nil {
			return err
		}
		d.Metadata = md
	}
	return nil
}

// checkSandboxMetadata validates the agentkernel.* keys with the parser
// the runtime uses, and their limits against the operator's policy, so a
// typo or an impossible limit fails here and not at the first tool call.
// An unknown agentkernel.* key is refused: stored, it would do nothing.
func (m *managed) checkSandboxMetadata(md map[string]string) error {
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
	}
	return nil
}

// normalizeEnvConfig merges the config field onto the current config
// (create: the default cloud config). Networking and packages left out on
// update keep their values.
func normalizeEnvConfig(in obj, cur json.RawMessage) (json.RawMessage, error) {
	base, err := parseObject("config", orDefault(cur, defaultCloudConfig()))
	if err != nil {
		return nil, err
	}
	cfg, ok, err := in.object("config")
	if err != nil || !ok {
		return mustJSON(base.m), err
	}
	typ, err := cfg.str("type")
	if err != nil {
		return nil, err
	}
	switch typ {
	case "", "cloud":
		if prev, _ := base.str("type"); prev != "cloud" {
			base, _ = parseObject("config", defaultCloudConfig())
		}
		if net, ok, err := cfg.object("networking"); err != nil {
			return nil, err
		} else if ok {
			n, err := normalizeNetworking(net)
			if err != nil {
				return nil, err
			}
			base.m["networking"] = n
		}
		if pk, ok, err := cfg.object("packages"); err != nil {
			return nil, err
		} else if ok {
			out := map[string]any{"type": "packages"}
			for _, mgr := range []string{"apt", "cargo", "gem", "go", "npm", "pip"} {
				list, err := pk.strings(mgr)
				if err != nil {
					return nil, err
				}
				if list == nil {
					list = []string{}
				}
				out[mgr] = list
			}
			base.m["packages"] = mustJSON(out)
		}
		base.m["type"] = json.RawMessage(`"cloud"`)
		return mustJSON(base.m), nil
	case "self_hosted":
		return json.RawMessage(`{"type":"self_hosted"}`), nil
	}
	return nil, BadRequest("field \"config.type\": unknown environment type %q (want cloud or self_hosted)", typ)
}

func normalizeNetworking(n obj) (json.RawMessage, error) {
	typ, err := n.reqStr("type")
	if err != nil {
		return nil, err
	}
	switch typ {
	case "unrestricted":
		return json.RawMessage(`{"type":"unrestricted"}`), nil
	case "limited":
		hosts, err := n.strings("allowed_hosts")
		if err != nil {
			return nil, err
		}
		if hosts == nil {
			hosts = []string{}
		}
		mcp, err := n.bool("allow_mcp_servers")
		if err != nil {
			return nil, err
		}
		pkg, err := n.bool("allow_package_managers")
		if err != nil {
			return nil, err
		}
		return mustJSON(map[string]any{"type": "limited", "allowed_hosts": hosts, "allow_mcp_servers": mcp, "allow_package_managers": pkg}), nil
	}
	return nil, BadRequest("field %q: unknown networking type %q (want unrestricted or limited)", n.field("type"), typ)
}

func (m *managed) createEnvironment(w http.ResponseWriter, r *http.Request) {
	in, err := decodeObject(r)
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	d := envDoc{Metadata: map[string]string{}}
	if err := m.applyEnvFields(in, &d, true); err != nil {
		m.writeError(w, r, err)
		return
	}
	e, err := m.st.CreateEnvironment(r.Context(), &store.Environment{ID: ids.New("env"), TenantID: tenant(r), Doc: mustJSON(d)})
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, toEnvJSON(e, d))
}

func (m *managed) getEnvironment(w http.ResponseWriter, r *http.Request) {
	e, err := m.environmentFor(r, r.PathValue("id"))
	if err != nil {
		m.writeError(w, r, err)
		return
	}
	m.writeEnvironment(w, r, e)
}

func (m *managed) updateEnvironment(w http.ResponseWriter, r *http.Request) {
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
	if err := m.applyEnvFields(in, &d, false); err != nil {
		m.writeError(w, r, err)
		return
	}
	e, err := m.st.UpdateEnvironment(r.Context(), id, mustJSON(d))
	if err != nil {
		m.writeError(w, r, notFoundAs("environment", id, err))
		return
	}
	writeJSON(w, http.StatusOK, toEnvJSON(e, d))
}

func (m *managed) archiveEnvironment(w http.ResponseWriter, r *http.Request) {
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

func (m *managed) deleteEnvironment(w http.ResponseWriter, r *http.Request) {
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

func (m *managed) listEnvironments(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p, err := parsePageQuery(q, 20, 100, false)
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
		out = append(out, toEnvJSON(e, d))
	}
	writePage(w, out, more, func(v map[string]any) string { return v["id"].(string) })
}
