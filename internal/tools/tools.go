// Package tools describes the tools a Managed Agents agent may call: the
// built-in agent_toolset_20260401 set (bash, read, write, edit, glob, grep),
// executed inside the session's sandbox by the guest, the agent's custom
// tools, answered by the client, and the tools of its MCP servers (an
// mcp_toolset per server), called by the daemon. It reads the agent's tool
// configuration (enabled tools and permission policies, as the SDK defines
// them) and runs built-in tools through the sandbox layer.
package tools

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/anthropics/anthropic-sdk-go/tools/agenttoolset"

	"github.com/agentkernel/agentkernel/internal/model"
)

// ToolsetType is the built-in toolset's type in an agent's tools.
const ToolsetType = "agent_toolset_20260401"

// Permission policies (BetaManagedAgents*PermissionPolicy types).
const (
	PolicyAlwaysAllow = "always_allow"
	PolicyAlwaysAsk   = "always_ask"
	PolicyAuto        = "auto"
)

// Kinds of tool.
const (
	KindUnknown = iota
	KindBuiltin
	KindCustom
	KindMCP
	// KindDaemon: a tool the daemon itself answers (a coordinator's thread
	// tools), never the sandbox.
	KindDaemon
)

// Names are the tools of agent_toolset_20260401, in the SDK's order.
var Names = []string{"bash", "read", "write", "edit", "glob", "grep"}

var (
	specsOnce sync.Once
	specs     map[string]model.Tool
)

// builtinSpecs are the model-facing definitions of the toolset, taken from
// the SDK's own implementations so names, descriptions and schemas match
// what runs in the guest. Building them starts nothing (bash is lazy).
func builtinSpecs() map[string]model.Tool {
	specsOnce.Do(func() {
		specs = map[string]model.Tool{}
		for _, t := range agenttoolset.BetaAgentToolset20260401(&agenttoolset.AgentToolContext{}) {
			schema, _ := json.Marshal(t.InputSchema())
			if t.Name() == "bash" {
				schema = withBackgroundFlag(schema)
			}
			specs[t.Name()] = model.Tool{Name: t.Name(), Description: t.Description(), InputSchema: schema}
		}
	})
	return specs
}

// Config is an agent's resolved tools.
type Config struct {
	// Tools are the definitions sent to the model, built-in first.
	Tools []model.Tool
	// MCPToolsets are the agent's mcp_toolset entries, in order; their
	// tools join Tools for a turn through WithMCP.
	MCPToolsets []MCPToolset
	kind        map[string]int
	policy      map[string]string
	mcp         map[string]MCPRef
}

// Kind tells whether name is a built-in, a custom tool or unknown.
func (c *Config) Kind(name string) int { return c.kind[name] }

// Asks reports whether a built-in tool needs a user.tool_confirmation
// before it runs (policy always_ask). With no policy set, tools run
// without confirmation.
func (c *Config) Asks(name string) bool { return c.policy[name] == PolicyAlwaysAsk }

// agentTool is the union of an agent's tools entries (SDK:
// BetaManagedAgentsAgentToolUnion).
type agentTool struct {
	Type          string          `json:"type"`
	MCPServerName string          `json:"mcp_server_name"`
	Name          string          `json:"name"`
	Description   string          `json:"description"`
	InputSchema   json.RawMessage `json:"input_schema"`
	DefaultConfig *toolConfig     `json:"default_config"`
	Configs       []toolConfig    `json:"configs"`
}

type toolConfig struct {
	Name             string  `json:"name"`
	Enabled          *bool   `json:"enabled"`
	PermissionPolicy *policy `json:"permission_policy"`
}

type policy struct {
	Type string `json:"type"`
}

// Parse resolves an agent's "tools" array. An mcp_toolset's tools are only
// known once its server lists them: Parse keeps its configuration, and
// WithMCP adds the tools for a turn.
func Parse(raw json.RawMessage) (*Config, error) {
	c := &Config{kind: map[string]int{}, policy: map[string]string{}, mcp: map[string]MCPRef{}}
	if len(raw) == 0 || string(raw) == "null" {
		return c, nil
	}
	var entries []agentTool
	if err := json.Unmarshal(raw, &entries); err != nil {
		return nil, fmt.Errorf("agent tools: %w", err)
	}
	specs := builtinSpecs()
	for _, e := range entries {
		switch e.Type {
		case ToolsetType:
			defEnabled, defPolicy := true, PolicyAlwaysAllow
			if d := e.DefaultConfig; d != nil {
				if d.Enabled != nil {
					defEnabled = *d.Enabled
				}
				if d.PermissionPolicy != nil && d.PermissionPolicy.Type != "" {
					defPolicy = d.PermissionPolicy.Type
				}
			}
			per := map[string]toolConfig{}
			for _, tc := range e.Configs {
				per[tc.Name] = tc
			}
			for _, name := range Names {
				enabled, pol := defEnabled, defPolicy
				if tc, ok := per[name]; ok {
					if tc.Enabled != nil {
						enabled = *tc.Enabled
					}
					if tc.PermissionPolicy != nil && tc.PermissionPolicy.Type != "" {
						pol = tc.PermissionPolicy.Type
					}
				}
				if !enabled {
					continue
				}
				c.Tools = append(c.Tools, specs[name])
				c.kind[name] = KindBuiltin
				c.policy[name] = pol
			}
		case "custom":
			if e.Name == "" {
				return nil, fmt.Errorf("agent tools: a custom tool has no name")
			}
			schema := e.InputSchema
			if len(schema) == 0 || string(schema) == "null" {
				schema = json.RawMessage(`{"type":"object"}`)
			}
			c.Tools = append(c.Tools, model.Tool{Name: e.Name, Description: e.Description, InputSchema: schema})
			c.kind[e.Name] = KindCustom
		case MCPToolsetType:
			if e.MCPServerName == "" {
				return nil, fmt.Errorf("agent tools: an mcp_toolset has no mcp_server_name")
			}
			c.MCPToolsets = append(c.MCPToolsets, parseMCPToolset(e))
		}
	}
	return c, nil
}

// withBackgroundFlag adds run_in_background to bash's schema: agentkernel
// runs such a command as a background task (30-minute cap) and answers at
// once with its id.
func withBackgroundFlag(schema []byte) []byte {
	var m map[string]any
	if json.Unmarshal(schema, &m) != nil {
		return schema
	}
	props, _ := m["properties"].(map[string]any)
	if props == nil {
		return schema
	}
	props["run_in_background"] = map[string]any{"type": "boolean",
		"description": "Run the command in the background (at most 30 minutes) and return at once with its task id; its output is not returned."}
	out, err := json.Marshal(m)
	if err != nil {
		return schema
	}
	return out
}
