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
	maxMCPServers       = 20
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
func applyAgentFields(in obj, d *agentDoc, create bool) error {
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
		servers, err := in.objects("mcp_servers")
		if err != nil {
			return err
		}
		if len(servers) > maxMCPServers {
			return BadRequest("field \"mcp_servers\" has %d servers; the limit is %d", len(servers), maxMCPServers)
		}
		out := make([]map[string]json.RawMessage, 0, len(servers))
		seen := map[string]bool{}
		for _, s := range servers {
			name, err := s.reqStr("name")
			if err != nil {
				return err
			}
			if seen[name] {
				return BadRequest("field %q: server name %q is used twice", s.field("name"), name)
			}
			seen[name] = true
			if _, err := s.reqStr("url"); err != nil {
				return err
			}
			if !s.set("type") {
				s.m["type"] = json.RawMessage(`"url"`)
			}
			out = append(out, s.m)
		}
		d.MCPServers = mustJSON(out)
	}
	if in.has("skills") {
		skills, err := in.objects("skills")
		if err != nil {
			return err
		}
		for _, s := range skills {
			if _, err := s.reqStr("skill_id"); err != nil {
				return err
			}
		}
		d.Skills = rawObjects(skills)
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
			if _, err := ei.reqStr("type"); err != nil {
				return err
			}
			d.ExecutionIdentity = mustJSON(ei.m)
		}
	}
	if in.has("multiagent") {
		d.Multiagent = json.RawMessage(`null`)
		if ma, ok, err := in.object("multiagent"); err != nil {
			return err
		} else if ok {
			d.Multiagent = mustJSON(ma.m)
		}
	}
	return nil
}

func rawObjects(os []obj) json.RawMessage {
	out := make([]map[string]json.RawMessage, len(os))
	for i, o := range os {
		out[i] = o.m
	}
	return mustJSON(out)
}

// normalizeModel accepts a model string or a model_config object and
// returns the config object ({"id": …, "speed": "standard", …}).
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
	if _, err := cfg.reqStr("id"); err != nil {
		return nil, err
	}
	if !cfg.set("speed") {
		cfg.m["speed"] = json.RawMessage(`"standard"`)
	}
	if e, ok := cfg.m["effort"]; ok {
		// A bare level is the same as {"type": level}; store one form.
		var level string
		if json.Unmarshal(e, &level) == nil {
			cfg.m["effort"] = mustJSON(map[string]string{"type": level})
		}
	}
	return mustJSON(cfg.m), nil
}

// Tool types of the agent_toolset and how unset policies default: with
// none set, tools run without confirmation (issue 5, item 6).
const (
	toolsetType     = "agent_toolset_20260401"
	mcpToolsetType  = "mcp_toolset"
	customToolType  = "custom"
	defaultToolConf = `{"enabled":true,"permission_policy":{"type":"always_allow"}}`
)

func normalizeTools(in obj) (json.RawMessage, error) {
	tools, err := in.objects("tools")
	if err != nil {
		return nil, err
	}
	if len(tools) > maxAgentTools {
		return nil, BadRequest("field \"tools\" has %d entries; the limit is %d", len(tools), maxAgentTools)
	}
	customNames := map[string]bool{}
	for _, t := range tools {
		typ, err := t.reqStr("type")
		if err != nil {
			return nil, err
		}
		switch typ {
		case toolsetType, mcpToolsetType:
			if typ == mcpToolsetType {
				if _, err := t.reqStr("mcp_server_name"); err != nil {
					return nil, err
				}
			}
			if !t.set("configs") {
				t.m["configs"] = json.RawMessage(`[]`)
			} else if _, err := t.objects("configs"); err != nil {
				return nil, err
			}
			if !t.set("default_config") {
				t.m["default_config"] = json.RawMessage(defaultToolConf)
			} else {
				dc, _, err := t.object("default_config")
				if err != nil {
					return nil, err
				}
				if !dc.set("enabled") {
					dc.m["enabled"] = json.RawMessage(`true`)
				}
				if !dc.set("permission_policy") {
					dc.m["permission_policy"] = json.RawMessage(`{"type":"always_allow"}`)
				}
				t.m["default_config"] = mustJSON(dc.m)
			}
		case customToolType:
			name, err := t.reqStr("name")
			if err != nil {
				return nil, err
			}
			if customNames[name] {
				return nil, BadRequest("field %q: custom tool %q is defined twice", t.field("name"), name)
			}
			customNames[name] = true
			if _, ok, err := t.object("input_schema"); err != nil {
				return nil, err
			} else if !ok {
				return nil, BadRequest("field %q is required (a JSON Schema object)", t.field("input_schema"))
			}
			if !t.set("description") {
				t.m["description"] = json.RawMessage(`""`)
			}
		default:
			return nil, BadRequest("field %q: unknown tool type %q (want %s, %s or %s)", t.field("type"), typ, toolsetType, mcpToolsetType, customToolType)
		}
	}
	return rawObjects(tools), nil
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
