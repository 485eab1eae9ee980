package managed

import (
	"encoding/json"
	"fmt"
	"net/url"
)

// MCP server limits: the SDK's (BetaManagedAgentsURLMCPServerParams: at
// most 20 servers, names of 1 to 255 characters) and a URL bound of our
// own.
const (
	maxMCPServers    = 20
	maxMCPServerName = 255
	maxMCPURL        = 2048
	maxMCPToolName   = 255
)

// normalizeMCPServers reads mcp_servers: URL servers with unique names,
// returned as the SDK's BetaManagedAgentsMCPServerURLDefinition. Null
// clears the list.
func normalizeMCPServers(in Obj) (json.RawMessage, error) {
	servers, err := in.Objects("mcp_servers")
	if err != nil {
		return nil, err
	}
	if len(servers) > maxMCPServers {
		return nil, badRequest("field %q has %d servers; the limit is %d", in.Field("mcp_servers"), len(servers), maxMCPServers)
	}
	out := make([]map[string]string, 0, len(servers))
	seen := map[string]string{}
	for _, s := range servers {
		typ, err := s.ReqStr("type")
		if err != nil {
			return nil, err
		}
		if typ != "url" {
			return nil, badRequest("field %q: unknown MCP server type %q (want url)", s.Field("type"), typ)
		}
		name, err := s.ReqStr("name")
		if err != nil {
			return nil, err
		}
		if err := s.LimitLen("name", name, maxMCPServerName); err != nil {
			return nil, err
		}
		if prev, ok := seen[name]; ok {
			return nil, badRequest("field %q: MCP server name %q is already used by %s; names must be unique", s.Field("name"), name, prev)
		}
		seen[name] = s.Field("name")
		raw, err := s.ReqStr("url")
		if err != nil {
			return nil, err
		}
		if err := checkMCPURL(s, raw); err != nil {
			return nil, err
		}
		out = append(out, map[string]string{"type": "url", "name": name, "url": raw})
	}
	return MustJSON(out), nil
}

func checkMCPURL(s Obj, raw string) error {
	if len(raw) > maxMCPURL {
		return badRequest("field %q is %d bytes; the limit is %d", s.Field("url"), len(raw), maxMCPURL)
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return badRequest("field %q must be an http or https URL, such as \"https://mcp.example.com/mcp\"", s.Field("url"))
	}
	if u.User != nil {
		return badRequest("field %q must not hold credentials; put the server's token in a vault credential (static_bearer or mcp_oauth) for this URL", s.Field("url"))
	}
	return nil
}

// normalizeMCPToolset resolves an mcp_toolset as the SDK's
// BetaManagedAgentsMCPToolset has it: default_config and every per-tool
// config complete. Unset, an MCP tool is enabled and always_ask (the
// hosted service's default: a tool a server adds later never runs
// unapproved).
func normalizeMCPToolset(t Obj, servers map[string]bool) (map[string]any, error) {
	server, err := t.ReqStr("mcp_server_name")
	if err != nil {
		return nil, err
	}
	if err := t.LimitLen("mcp_server_name", server, maxMCPServerName); err != nil {
		return nil, err
	}
	if servers[server] {
		return nil, badRequest("field %q: MCP server %q already has an mcp_toolset; configure its tools in that one", t.Field("mcp_server_name"), server)
	}
	servers[server] = true
	defEnabled, defPolicy, err := defaultToolConfig(t, "always_ask")
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
		if err := c.LimitLen("name", name, maxMCPToolName); err != nil {
			return nil, err
		}
		if seen[name] {
			return nil, badRequest("field %q: tool %q is configured twice", c.Field("name"), name)
		}
		seen[name] = true
		enabled, policy, err := toolConfig(c)
		if err != nil {
			return nil, err
		}
		if enabled == nil {
			enabled = &defEnabled
		}
		if policy == "" {
			policy = defPolicy
		}
		outConfigs = append(outConfigs, map[string]any{"name": name, "enabled": *enabled, "permission_policy": map[string]string{"type": policy}})
	}
	return map[string]any{"type": mcpToolsetType, "mcp_server_name": server, "configs": outConfigs,
		"default_config": map[string]any{"enabled": defEnabled, "permission_policy": map[string]string{"type": defPolicy}}}, nil
}

// checkMCPRefs holds an agent's tools and mcp_servers to each other, as
// the SDK documents: every mcp_toolset names a server of the agent, and
// every server is used by an mcp_toolset (an unused one is refused).
// d holds both after the request's fields were applied, so an update of
// one is checked against the other as stored.
func checkMCPRefs(in Obj, d *agentDoc) error {
	var servers []struct {
		Name string `json:"name"`
	}
	var tools []struct {
		Type          string `json:"type"`
		MCPServerName string `json:"mcp_server_name"`
	}
	if err := jsonUnmarshal(d.MCPServers, &servers); err != nil {
		return fmt.Errorf("stored mcp_servers: %w", err)
	}
	if err := jsonUnmarshal(d.Tools, &tools); err != nil {
		return fmt.Errorf("stored tools: %w", err)
	}
	names := map[string]bool{}
	for _, s := range servers {
		names[s.Name] = true
	}
	used := map[string]bool{}
	for i, t := range tools {
		if t.Type != mcpToolsetType {
			continue
		}
		if !names[t.MCPServerName] {
			return badRequest("field %q: the agent has no MCP server named %q; add it to %q", in.Field(fmt.Sprintf("tools[%d].mcp_server_name", i)), t.MCPServerName, in.Field("mcp_servers"))
		}
		used[t.MCPServerName] = true
	}
	for i, s := range servers {
		if !used[s.Name] {
			return badRequest("field %q: MCP server %q is used by no mcp_toolset in %q; add {\"type\": \"mcp_toolset\", \"mcp_server_name\": %q} or remove the server",
				in.Field(fmt.Sprintf("mcp_servers[%d]", i)), s.Name, in.Field("tools"), s.Name)
		}
	}
	return nil
}
