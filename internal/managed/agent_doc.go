package managed

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// agentDoc is the stored body of one agent version, in the SDK's response
// shape (anthropic.BetaManagedAgentsAgent without id, type, version and
// timestamps). The runtime reads it back with the SDK's types.
type agentDoc struct {
	Name              string            `json:"name"`
	Description       string            `json:"description"`
	System            string            `json:"system"`
	Model             json.RawMessage   `json:"model"`
	Tools             json.RawMessage   `json:"tools"`
	MCPServers        json.RawMessage   `json:"mcp_servers"`
	Skills            json.RawMessage   `json:"skills"`
	Metadata          map[string]string `json:"metadata"`
	ExecutionIdentity json.RawMessage   `json:"execution_identity"`
	Multiagent        json.RawMessage   `json:"multiagent"`
}

// Agent limits (the SDK's documented bounds).
const (
	maxAgentName        = 256
	maxAgentDescription = 2048
	maxSystemPrompt     = 100_000
	maxAgentTools       = 256
)

var defaultExecutionIdentity = json.RawMessage(`{"type":"service_account"}`)

func newAgentDoc() agentDoc {
	return agentDoc{
		Model: json.RawMessage(`null`), Tools: json.RawMessage(`[]`), MCPServers: json.RawMessage(`[]`),
		Skills: json.RawMessage(`[]`), Metadata: map[string]string{},
		ExecutionIdentity: defaultExecutionIdentity, Multiagent: json.RawMessage(`null`),
	}
}

// applyAgentFields writes the fields present in in onto d: on create d is
// fresh, on update it is the current version (omitted fields preserved,
// null clears where the SDK allows it). multiagent, which names other
// agents, is the service's applyMultiagent.
func applyAgentFields(in Obj, d *agentDoc, create bool, resolve skillResolver) error {
	if create || in.Has("name") {
		name, err := in.ReqStr("name")
		if err != nil {
			return err
		}
		if err := in.LimitLen("name", name, maxAgentName); err != nil {
			return err
		}
		d.Name = name
	}
	for _, f := range []struct {
		key string
		dst *string
		max int
	}{{"description", &d.Description, maxAgentDescription}, {"system", &d.System, maxSystemPrompt}} {
		if !in.Has(f.key) {
			continue
		}
		v, err := in.Str(f.key)
		if err != nil {
			return err
		}
		if err := in.LimitLen(f.key, v, f.max); err != nil {
			return err
		}
		*f.dst = v
	}
	if create || in.Has("model") {
		m, err := normalizeModel(in, "model")
		if err != nil {
			return err
		}
		d.Model = m
	}
	if in.Has("tools") {
		tools, err := normalizeTools(in)
		if err != nil {
			return err
		}
		d.Tools = tools
	}
	if in.Has("mcp_servers") {
		servers, err := normalizeMCPServers(in)
		if err != nil {
			return err
		}
		d.MCPServers = servers
	}
	if create || in.Has("tools") || in.Has("mcp_servers") {
		if err := checkMCPRefs(in, d); err != nil {
			return err
		}
	}
	if in.Has("skills") {
		sk, err := normalizeSkills(in, resolve)
		if err != nil {
			return err
		}
		d.Skills = sk
	}
	if in.Has("metadata") {
		md, err := in.MetadataPatch("metadata", d.Metadata, false)
		if err != nil {
			return err
		}
		d.Metadata = md
	}
	if in.Has("execution_identity") {
		d.ExecutionIdentity = defaultExecutionIdentity
		if ei, ok, err := in.Object("execution_identity"); err != nil {
			return err
		} else if ok {
			typ, err := ei.ReqStr("type")
			if err != nil {
				return err
			}
			if typ != "service_account" {
				return ei.NotYet("type", fmt.Sprintf("execution identity %q; every session runs as the daemon's own service account ({\"type\": \"service_account\"})", typ))
			}
		}
	}
	return nil
}

func rawObjects(os []Obj) json.RawMessage {
	out := make([]map[string]json.RawMessage, len(os))
	for i, o := range os {
		out[i] = o.Map()
	}
	return MustJSON(out)
}

// normalizeModel accepts a model string or a model_config object and
// returns the config object ({"id": …, "speed": "standard"}). The options
// no provider here passes on (fast speed, effort, inference_geo) are
// refused rather than stored.
func normalizeModel(in Obj, k string) (json.RawMessage, error) {
	if !in.Set(k) {
		return nil, badRequest("field %q is required: a model id such as \"claude-sonnet-4-5\" or {\"id\": …}", in.Field(k))
	}
	var id string
	if json.Unmarshal(in.Raw(k), &id) == nil {
		if id == "" {
			return nil, badRequest("field %q must not be empty", in.Field(k))
		}
		return MustJSON(map[string]string{"id": id, "speed": "standard"}), nil
	}
	cfg, _, err := in.Object(k)
	if err != nil {
		return nil, badRequest("field %q must be a model id string or an object with an \"id\"", in.Field(k))
	}
	if id, err = cfg.ReqStr("id"); err != nil {
		return nil, err
	}
	speed, err := cfg.Str("speed")
	if err != nil {
		return nil, err
	}
	switch speed {
	case "", "standard":
	case "fast":
		return nil, cfg.NotYet("speed", "every model request is sent at standard speed")
	default:
		return nil, badRequest("field %q must be standard or fast, got %q", cfg.Field("speed"), speed)
	}
	if cfg.Set("effort") {
		return nil, cfg.NotYet("effort", "model requests are sent without an effort level")
	}
	if cfg.Set("inference_geo") {
		return nil, cfg.NotYet("inference_geo", "the provider's default region serves every request")
	}
	cfg.Has("effort")
	cfg.Has("inference_geo")
	return MustJSON(map[string]string{"id": id, "speed": "standard"}), nil
}

// agentJSON is the SDK's BetaManagedAgentsAgent.
func agentJSON(id string, version int64, d agentDoc, created, updated any, archived any) map[string]any {
	return map[string]any{
		"id": id, "type": "agent", "version": version,
		"name": d.Name, "description": d.Description, "system": d.System, "model": d.Model,
		"tools": orEmptyArray(d.Tools), "mcp_servers": orEmptyArray(d.MCPServers), "skills": orEmptyArray(d.Skills),
		"metadata": orEmptyMap(d.Metadata), "execution_identity": orDefault(d.ExecutionIdentity, defaultExecutionIdentity),
		"multiagent": orDefault(d.Multiagent, json.RawMessage(`null`)),
		"created_at": created, "updated_at": updated, "archived_at": archived,
	}
}

func orEmptyArray(b json.RawMessage) json.RawMessage { return orDefault(b, json.RawMessage(`[]`)) }

func orDefault(b, def json.RawMessage) json.RawMessage {
	if len(b) == 0 {
		return def
	}
	return b
}

func orEmptyMap(m map[string]string) map[string]string {
	if m == nil {
		return map[string]string{}
	}
	return m
}

func decodeAgentDoc(b []byte) (agentDoc, error) {
	d := newAgentDoc()
	if err := json.Unmarshal(b, &d); err != nil {
		return d, fmt.Errorf("stored agent doc: %w", err)
	}
	return d, nil
}

// agentSnapshot renders an agent version as the session's agent field.
func agentSnapshot(a *store.Agent, d agentDoc) json.RawMessage {
	return MustJSON(map[string]any{
		"id": a.ID, "type": agentSnapshotType, "version": a.Version,
		"name": d.Name, "description": d.Description, "system": d.System, "model": d.Model,
		"tools": orEmptyArray(d.Tools), "mcp_servers": orEmptyArray(d.MCPServers), "skills": orEmptyArray(d.Skills),
		"execution_identity": orDefault(d.ExecutionIdentity, defaultExecutionIdentity),
		"multiagent":         orDefault(d.Multiagent, json.RawMessage(`null`)),
	})
}

// agentSnapshotType is the type of a session's agent field.
const agentSnapshotType = "agent"

// sessionAgent is the session's agent field for agent version a with the
// session's agent_with_overrides applied (overrides: the override fields,
// empty when none).
func (s *Service) sessionAgent(ctx context.Context, tenantID string, a *store.Agent, overrides Obj) (json.RawMessage, error) {
	ad, err := decodeAgentDoc(a.Doc)
	if err == nil {
		err = applyAgentFields(overrides, &ad, false, s.skillsFor(ctx, tenantID))
	}
	if err != nil {
		return nil, err
	}
	if hasMultiagent(ad) {
		if ad.Multiagent, err = s.expandRoster(ctx, a, ad); err != nil {
			return nil, err
		}
	}
	return agentSnapshot(a, ad), nil
}

// expandRoster is a session's view of its coordinator's roster: the full
// definition of every roster agent version (the SDK's
// BetaManagedAgentsSessionMultiagentCoordinator), snapshotted with the
// session as its own agent is. The coordinator's own entry (self) runs
// as the coordinator does, session overrides included.
func (s *Service) expandRoster(ctx context.Context, self *store.Agent, selfDoc agentDoc) (json.RawMessage, error) {
	var roster struct {
		Type   string `json:"type"`
		Agents []struct {
			ID      string `json:"id"`
			Version int64  `json:"version"`
		} `json:"agents"`
	}
	if err := json.Unmarshal(selfDoc.Multiagent, &roster); err != nil {
		return nil, err
	}
	out := make([]map[string]json.RawMessage, 0, len(roster.Agents))
	for _, ref := range roster.Agents {
		a, d := self, selfDoc
		if ref.ID != self.ID || ref.Version != self.Version {
			var err error
			if a, err = s.st.GetAgent(ctx, ref.ID, ref.Version); err != nil {
				return nil, fmt.Errorf("roster agent %s version %d: %w", ref.ID, ref.Version, err)
			}
			if d, err = decodeAgentDoc(a.Doc); err != nil {
				return nil, err
			}
		}
		var snap map[string]json.RawMessage
		if err := json.Unmarshal(agentSnapshot(a, d), &snap); err != nil {
			return nil, err
		}
		delete(snap, "multiagent") // threads do not delegate (depth 1)
		out = append(out, snap)
	}
	return MustJSON(map[string]any{"type": roster.Type, "agents": out}), nil
}

// updateSessionAgentSnapshot applies tools and mcp_servers of ag (the only agent
// fields the SDK lets a session change) to a session's agent snapshot.
func updateSessionAgentSnapshot(snapshot json.RawMessage, ag Obj) (json.RawMessage, error) {
	var snap map[string]json.RawMessage
	if err := json.Unmarshal(snapshot, &snap); err != nil {
		return nil, err
	}
	ad := newAgentDoc()
	ad.Tools, ad.MCPServers = snap["tools"], snap["mcp_servers"]
	if err := applyAgentFields(ag, &ad, false, nil); err != nil {
		return nil, err
	}
	snap["tools"], snap["mcp_servers"] = orEmptyArray(ad.Tools), orEmptyArray(ad.MCPServers)
	return MustJSON(snap), nil
}
