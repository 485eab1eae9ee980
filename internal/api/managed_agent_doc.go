package api

import (
	"encoding/json"
	"fmt"
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
// null clears where the SDK allows it).
func applyAgentFields(in obj, d *agentDoc, create bool, resolve skillResolver) error {
	if create || in.has("name") {
		name, err := in.reqStr("name")
		if err != nil {
			return err
		}
		if err := in.limitLen("name", name, maxAgentName); err != nil {
			return err
		}
		d.Name = name
	}
	for _, f := range []struct {
		key string
		dst *string
		max int
	}{{"description", &d.Description, maxAgentDescription}, {"system", &d.System, maxSystemPrompt}} {
		if !in.has(f.key) {
			continue
		}
		v, err := in.str(f.key)
		if err != nil {
			return err
		}
		if err := in.limitLen(f.key, v, f.max); err != nil {
			return err
		}
		*f.dst = v
	}
	if create || in.has("model") {
		m, err := normalizeModel(in, "model")
		if err != nil {
			return err
		}
		d.Model = m
	}
	if in.has("tools") {
		tools, err := normalizeTools(in)
		if err != nil {
			return err
		}
		d.Tools = tools
	}
	if in.has("mcp_servers") {
		servers, err := normalizeMCPServers(in)
		if err != nil {
			return err
		}
		d.MCPServers = servers
	}
	if create || in.has("tools") || in.has("mcp_servers") {
		if err := checkMCPRefs(in, d); err != nil {
			return err
		}
	}
	if err := refuseAgentExtras(in); err != nil {
		return err
	}
	if in.has("skills") {
		sk, err := normalizeSkills(in, resolve)
		if err != nil {
			return err
		}
		d.Skills = sk
	}
	if in.has("metadata") {
		md, err := in.metadataPatch("metadata", d.Metadata, false)
		if err != nil {
			return err
		}
		d.Metadata = md
	}
	if in.has("execution_identity") {
		d.ExecutionIdentity = defaultExecutionIdentity
		if ei, ok, err := in.object("execution_identity"); err != nil {
			return err
		} else if ok {
			typ, err := ei.reqStr("type")
			if err != nil {
				return err
			}
			if typ != "service_account" {
				return ei.notYet("type", fmt.Sprintf("execution identity %q; every session runs as the daemon's own service account ({\"type\": \"service_account\"})", typ))
			}
		}
	}
	return nil
}

// refuseAgentExtras refuses the agent fields the SDK defines and the
// runtime does not act on yet (multiagent); their empty values (what the SDK sends when
// they are left out, or what clears them) are accepted and stored as such.
func refuseAgentExtras(in obj) error {
	return in.notYetUnlessEmpty("multiagent", "sessions run one agent; send null or leave it out")
}

func rawObjects(os []obj) json.RawMessage {
	out := make([]map[string]json.RawMessage, len(os))
	for i, o := range os {
		out[i] = o.m
	}
	return mustJSON(out)
}

// normalizeModel accepts a model string or a model_config object and
// returns the config object ({"id": …, "speed": "standard"}). The options
// no provider here passes on (fast speed, effort, inference_geo) are
// refused rather than stored.
func normalizeModel(in obj, k string) (json.RawMessage, error) {
	if !in.set(k) {
		return nil, BadRequest("field %q is required: a model id such as \"claude-sonnet-4-5\" or {\"id\": …}", in.field(k))
	}
	var id string
	if json.Unmarshal(in.m[k], &id) == nil {
		if id == "" {
			return nil, BadRequest("field %q must not be empty", in.field(k))
		}
		return mustJSON(map[string]string{"id": id, "speed": "standard"}), nil
	}
	cfg, _, err := in.object(k)
	if err != nil {
		return nil, BadRequest("field %q must be a model id string or an object with an \"id\"", in.field(k))
	}
	if id, err = cfg.reqStr("id"); err != nil {
		return nil, err
	}
	speed, err := cfg.str("speed")
	if err != nil {
		return nil, err
	}
	switch speed {
	case "", "standard":
	case "fast":
		return nil, cfg.notYet("speed", "every model request is sent at standard speed")
	default:
		return nil, BadRequest("field %q must be standard or fast, got %q", cfg.field("speed"), speed)
	}
	if cfg.set("effort") {
		return nil, cfg.notYet("effort", "model requests are sent without an effort level")
	}
	if cfg.set("inference_geo") {
		return nil, cfg.notYet("inference_geo", "the provider's default region serves every request")
	}
	cfg.has("effort")
	cfg.has("inference_geo")
	return mustJSON(map[string]string{"id": id, "speed": "standard"}), nil
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
