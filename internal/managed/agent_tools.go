package managed

import (
	"encoding/json"
	"fmt"
	"slices"
)

// Tool types of an agent's tools. With no permission policy set, tools run
// without confirmation (issue 5, item 6).
const (
	toolsetType    = "agent_toolset_20260401"
	mcpToolsetType = "mcp_toolset"
	customToolType = "custom"
)

// toolsetTools are the tools of agent_toolset_20260401 the guest runs;
// webTools are the toolset's server-side tools, which agentkernel does not
// offer (a config may only say they are disabled).
var (
	toolsetTools = []string{"bash", "read", "write", "edit", "glob", "grep"}
	webTools     = []string{"web_fetch", "web_search"}
)

// normalizeTools reads the tools array field by field (every key of every
// entry is either understood or refused) and returns it with defaults
// filled in.
func normalizeTools(in Obj) (json.RawMessage, error) {
	tools, err := in.Objects("tools")
	if err != nil {
		return nil, err
	}
	if len(tools) > maxAgentTools {
		return nil, badRequest("field \"tools\" has %d entries; the limit is %d", len(tools), maxAgentTools)
	}
	out := make([]map[string]any, 0, len(tools))
	names := map[string]string{} // tool name → the field that defined it
	mcpServers := map[string]bool{}
	for _, t := range tools {
		typ, err := t.ReqStr("type")
		if err != nil {
			return nil, err
		}
		var entry map[string]any
		switch typ {
		case toolsetType:
			if prev, ok := names["bash"]; ok {
				return nil, badRequest("field %q: %s is listed twice (first at %s)", t.Field("type"), toolsetType, prev)
			}
			for _, n := range toolsetTools {
				names[n] = t.Path()
			}
			entry, err = normalizeToolset(t)
		case mcpToolsetType:
			entry, err = normalizeMCPToolset(t, mcpServers)
		case customToolType:
			entry, err = normalizeCustomTool(t, names)
		default:
			return nil, badRequest("field %q: unknown tool type %q (want %s, %s or %s)", t.Field("type"), typ, toolsetType, mcpToolsetType, customToolType)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, entry)
	}
	return MustJSON(out), nil
}

// normalizeToolset resolves the toolset as the SDK's response has it: the
// default config and every per-tool config complete.
func normalizeToolset(t Obj) (map[string]any, error) {
	defEnabled, defPolicy, err := defaultToolConfig(t, "always_allow")
	if err != nil {
		return nil, err
	}
	configs, err := t.Objects("configs")
	if err != nil {
		return nil, err
	}
	outConfigs := make([]map[string]any, 0, len(configs))
	seen := map[string]bool{}
	for _, c := range configs {
		name, err := c.ReqStr("name")
		if err != nil {
			return nil, err
		}
		if typ, err := c.Str("type"); err != nil {
			return nil, err
		} else if typ != "" && typ != name {
			return nil, badRequest("field %q is %q but %q is %q; they name the same tool", c.Field("type"), typ, c.Field("name"), name)
		}
		if seen[name] {
			return nil, badRequest("field %q: tool %q is configured twice", c.Field("name"), name)
		}
		seen[name] = true
		enabled, policy, err := toolConfig(c)
		if err != nil {
			return nil, err
		}
		switch {
		case slices.Contains(toolsetTools, name):
		case slices.Contains(webTools, name):
			// Refused unless the config only says the tool is off, which is
			// true: agentkernel offers neither web tool.
			if enabled == nil || *enabled {
				return nil, c.NotYet("name", fmt.Sprintf("%s is not offered by agentkernel's toolset; configure it with \"enabled\": false or leave it out", name))
			}
			for _, k := range []string{"allowed_domains", "blocked_domains", "max_content_tokens", "url_sources", "user_location"} {
				if c.Has(k) {
					return nil, c.NotYet(k, name+" is not offered by agentkernel's toolset")
				}
			}
		default:
			return nil, badRequest("field %q: unknown tool %q in %s (want one of %v)", c.Field("name"), name, toolsetType, append(slices.Clone(toolsetTools), webTools...))
		}
		if enabled == nil {
			enabled = &defEnabled
		}
		if policy == "" {
			policy = defPolicy
		}
		outConfigs = append(outConfigs, map[string]any{"name": name, "type": name, "enabled": *enabled, "permission_policy": map[string]string{"type": policy}})
	}
	return map[string]any{"type": toolsetType, "configs": outConfigs,
		"default_config": map[string]any{"enabled": defEnabled, "permission_policy": map[string]string{"type": defPolicy}}}, nil
}

// toolConfig reads enabled and permission_policy of a default_config or a
// per-tool config; nil and "" when absent.
func toolConfig(c Obj) (*bool, string, error) {
	var enabled *bool
	if c.Set("enabled") {
		b, err := c.Bool("enabled")
		if err != nil {
			return nil, "", err
		}
		enabled = &b
	}
	c.Has("enabled")
	pp, ok, err := c.Object("permission_policy")
	c.Has("permission_policy")
	if err != nil || !ok {
		return enabled, "", err
	}
	policy, err := pp.ReqStr("type")
	if err != nil {
		return nil, "", err
	}
	switch policy {
	case "always_allow", "always_ask":
	case "auto":
		return nil, "", pp.NotYet("type", "the auto permission policy needs a classifier agentkernel does not have; use always_allow or always_ask")
	default:
		return nil, "", badRequest("field %q: unknown permission policy %q (want always_allow or always_ask)", pp.Field("type"), policy)
	}
	return enabled, policy, nil
}

func normalizeCustomTool(t Obj, names map[string]string) (map[string]any, error) {
	name, err := t.ReqStr("name")
	if err != nil {
		return nil, err
	}
	if prev, ok := names[name]; ok {
		return nil, badRequest("field %q: tool %q is already defined by %s", t.Field("name"), name, prev)
	}
	names[name] = t.Field("name")
	desc, err := t.Str("description")
	if err != nil {
		return nil, err
	}
	schema, ok, err := t.Opaque("input_schema")
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, badRequest("field %q is required (a JSON Schema object)", t.Field("input_schema"))
	}
	return map[string]any{"type": customToolType, "name": name, "description": desc, "input_schema": schema}, nil
}

// defaultToolConfig reads a toolset's default_config (enabled, then
// permission_policy), the toolset's own default policy where it says none.
func defaultToolConfig(t Obj, policy string) (bool, string, error) {
	enabled := true
	t.Has("default_config")
	dc, ok, err := t.Object("default_config")
	if err != nil || !ok {
		return enabled, policy, err
	}
	e, p, err := toolConfig(dc)
	if err != nil {
		return false, "", err
	}
	if e != nil {
		enabled = *e
	}
	if p != "" {
		policy = p
	}
	return enabled, policy, nil
}
