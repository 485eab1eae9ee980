package tools

import (
	"crypto/sha256"
	"encoding/hex"
	"maps"
	"regexp"
	"slices"

	"github.com/agentkernel/agentkernel/internal/model"
)

// MCPToolsetType is an MCP toolset's type in an agent's tools.
const MCPToolsetType = "mcp_toolset"

// MCPDefaultPolicy is an MCP toolset's permission policy when the agent
// sets none: always_ask, as the hosted service does, so a tool a server
// adds later never runs without the user's approval.
const MCPDefaultPolicy = PolicyAlwaysAsk

// MCPToolset is one mcp_toolset entry: which tools of the server are
// enabled and under which permission policy.
type MCPToolset struct {
	Server         string
	DefaultEnabled bool
	DefaultPolicy  string
	// Configs are the per-tool overrides by the server's tool name.
	Configs map[string]MCPToolConfig
}

// MCPToolConfig is one per-tool override; nil/"" leave the default.
type MCPToolConfig struct {
	Enabled *bool
	Policy  string
}

// MCPRef is what a model-facing tool name stands for.
type MCPRef struct {
	Server string // the agent's name for the server
	Tool   string // the server's name for the tool
}

// MCPTool is a tool a server listed.
type MCPTool struct {
	Name        string
	Description string
	InputSchema []byte
}

func parseMCPToolset(e agentTool) MCPToolset {
	ts := MCPToolset{Server: e.MCPServerName, DefaultEnabled: true, DefaultPolicy: MCPDefaultPolicy, Configs: map[string]MCPToolConfig{}}
	if d := e.DefaultConfig; d != nil {
		if d.Enabled != nil {
			ts.DefaultEnabled = *d.Enabled
		}
		if d.PermissionPolicy != nil && d.PermissionPolicy.Type != "" {
			ts.DefaultPolicy = d.PermissionPolicy.Type
		}
	}
	for _, tc := range e.Configs {
		cfg := MCPToolConfig{Enabled: tc.Enabled}
		if tc.PermissionPolicy != nil {
			cfg.Policy = tc.PermissionPolicy.Type
		}
		ts.Configs[tc.Name] = cfg
	}
	return ts
}

// resolve is a listed tool's setting under the toolset.
func (ts MCPToolset) resolve(tool string) (bool, string) {
	enabled, policy := ts.DefaultEnabled, ts.DefaultPolicy
	if tc, ok := ts.Configs[tool]; ok {
		if tc.Enabled != nil {
			enabled = *tc.Enabled
		}
		if tc.Policy != "" {
			policy = tc.Policy
		}
	}
	return enabled, policy
}

// WithMCP returns a copy of c with the enabled tools each server listed
// (by the agent's server name) offered to the model under their MCPName,
// after the agent's own tools. A name that would collide with a tool
// already offered is left out and reported in skipped.
func (c *Config) WithMCP(listed map[string][]MCPTool) (out *Config, skipped []string) {
	out = &Config{Tools: slices.Clone(c.Tools), MCPToolsets: c.MCPToolsets,
		kind: maps.Clone(c.kind), policy: maps.Clone(c.policy), mcp: maps.Clone(c.mcp)}
	if out.mcp == nil {
		out.mcp = map[string]MCPRef{}
	}
	for _, ts := range c.MCPToolsets {
		for _, t := range listed[ts.Server] {
			enabled, policy := ts.resolve(t.Name)
			if !enabled {
				continue
			}
			name := MCPName(ts.Server, t.Name)
			if out.kind[name] != KindUnknown {
				skipped = append(skipped, ts.Server+"/"+t.Name)
				continue
			}
			schema := t.InputSchema
			if len(schema) == 0 || string(schema) == "null" {
				schema = []byte(`{"type":"object"}`)
			}
			out.Tools = append(out.Tools, model.Tool{Name: name, Description: t.Description, InputSchema: schema})
			out.kind[name] = KindMCP
			out.policy[name] = policy
			out.mcp[name] = MCPRef{Server: ts.Server, Tool: t.Name}
		}
	}
	return out, skipped
}

// MCP tells which server and tool a model-facing name stands for.
func (c *Config) MCP(name string) (MCPRef, bool) {
	r, ok := c.mcp[name]
	return r, ok
}

// maxToolName is the Messages API's limit on a tool name
// (^[a-zA-Z0-9_-]{1,128}$).
const maxToolName = 128

var (
	cleanServer = regexp.MustCompile(`^[a-zA-Z0-9-]+(_[a-zA-Z0-9-]+)*$`)
	cleanTool   = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)
	unsafeChars = regexp.MustCompile(`[^a-zA-Z0-9_-]`)
)

// MCPName is the name the model sees for tool of server:
// "mcp__<server>__<tool>", the convention MCP clients such as Claude Code
// use. The Messages API allows only [a-zA-Z0-9_-]{1,128} in a tool name,
// and the name must be unambiguous, so when the server name holds "__" (or
// starts or ends with "_") or either name holds another character, or the
// whole is too long, the name is "mcp_<12 hex of sha256(server, tool)>__"
// followed by as much of the sanitized names as fits. A hex digit after
// "mcp_" never starts a plain name, so the two forms cannot meet, and the
// plain form is injective since the server part holds no "__" and does not
// end in "_".
func MCPName(server, tool string) string {
	plain := "mcp__" + server + "__" + tool
	if cleanServer.MatchString(server) && cleanTool.MatchString(tool) && len(plain) <= maxToolName {
		return plain
	}
	sum := sha256.Sum256([]byte(server + "\x00" + tool))
	name := "mcp_" + hex.EncodeToString(sum[:6]) + "__" + unsafeChars.ReplaceAllString(server, "_") + "__" + unsafeChars.ReplaceAllString(tool, "_")
	return name[:min(len(name), maxToolName)]
}

// WithDaemon returns a copy of c with the daemon's own tools added (kind
// KindDaemon, run without confirmation). A name the agent already uses
// keeps the agent's tool; skipped lists those.
func (c *Config) WithDaemon(ts []model.Tool) (out *Config, skipped []string) {
	out = &Config{Tools: slices.Clone(c.Tools), MCPToolsets: c.MCPToolsets,
		kind: maps.Clone(c.kind), policy: maps.Clone(c.policy), mcp: maps.Clone(c.mcp)}
	if out.kind == nil {
		out.kind = map[string]int{}
	}
	for _, t := range ts {
		if out.kind[t.Name] != KindUnknown {
			skipped = append(skipped, t.Name)
			continue
		}
		out.Tools = append(out.Tools, t)
		out.kind[t.Name] = KindDaemon
	}
	return out, skipped
}
