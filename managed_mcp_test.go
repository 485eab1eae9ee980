package agentkernel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/mcp/mcptest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestMCPServerThroughTheSDK: an agent with an MCP server and its
// mcp_toolset, created with anthropic-sdk-go, answers in the SDK's shapes
// (defaults resolved); a turn offers the server's tool to the model, calls
// it and streams agent.mcp_tool_use and agent.mcp_tool_result as the SDK's
// event types. (The daemon has no vault wiring in this test, so the server
// takes no token here; the bearer is covered in internal/session.)
func TestMCPServerThroughTheSDK(t *testing.T) {
	srv := mcptest.New(t, mcptest.Options{})
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		blocks := r.Blocks(len(r.Messages) - 1)
		for _, b := range blocks {
			if b.Type == "tool_result" {
				return anthropictest.Turn{Text: "got " + b.ToolResultText()}
			}
		}
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "mcp__docs__echo", Input: map[string]any{"text": "from the sdk"}}}}
	})
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	})
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)
	a, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "mcp", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "docs", URL: srv.URL, Type: anthropic.BetaManagedAgentsURLMCPServerParamsTypeURL}},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{
			Type: anthropic.BetaManagedAgentsMCPToolsetParamsTypeMCPToolset, MCPServerName: "docs",
			Configs: []anthropic.BetaManagedAgentsMCPToolConfigParams{{Name: "echo",
				PermissionPolicy: anthropic.BetaManagedAgentsMCPToolConfigParamsPermissionPolicyUnion{
					OfAlwaysAllow: &anthropic.BetaManagedAgentsAlwaysAllowPolicyParam{Type: anthropic.BetaManagedAgentsAlwaysAllowPolicyTypeAlwaysAllow}}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(a.MCPServers) != 1 || a.MCPServers[0].Name != "docs" || a.MCPServers[0].URL != srv.URL || a.MCPServers[0].Type != "url" {
		t.Fatalf("mcp_servers %s", a.RawJSON())
	}
	ts := a.Tools[0].AsMCPToolset()
	if ts.Type != "mcp_toolset" || ts.MCPServerName != "docs" || !ts.DefaultConfig.Enabled || ts.DefaultConfig.PermissionPolicy.Type != "always_ask" ||
		len(ts.Configs) != 1 || ts.Configs[0].Name != "echo" || !ts.Configs[0].Enabled || ts.Configs[0].PermissionPolicy.Type != "always_allow" {
		t.Fatalf("mcp_toolset %s", a.Tools[0].RawJSON())
	}

	env := newEnv(t, c, "mcp")
	s := newSession(t, c, a.ID, env.ID)
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("use the docs")}}); err != nil {
		t.Fatal(err)
	}
	var use anthropic.BetaManagedAgentsAgentMCPToolUseEvent
	var res anthropic.BetaManagedAgentsAgentMCPToolResultEvent
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "agent.mcp_tool_use":
			use = ev.AsAgentMCPToolUse()
		case "agent.mcp_tool_result":
			res = ev.AsAgentMCPToolResult()
		case "session.error":
			t.Fatalf("session.error %s", ev.RawJSON())
		}
		if ev.Type == "session.status_idle" {
			if ev.AsSessionStatusIdle().StopReason.Type != "end_turn" {
				t.Fatalf("idle %s", ev.RawJSON())
			}
			break
		}
	}
	if use.Name != "echo" || use.MCPServerName != "docs" || use.Input["text"] != "from the sdk" || use.EvaluatedPermission != "allow" {
		t.Fatalf("agent.mcp_tool_use %s", use.RawJSON())
	}
	if res.MCPToolUseID != use.ID || res.IsError || len(res.Content) != 1 || res.Content[0].Text != "echo: from the sdk" {
		t.Fatalf("agent.mcp_tool_result %s", res.RawJSON())
	}
	if srv.Calls.Load() != 1 {
		t.Fatalf("%d calls reached the server", srv.Calls.Load())
	}
}

// TestMCPAgentInputIsChecked: bad mcp_servers and mcp_toolset input is a
// 400 that names the field, on agents, agent updates and session
// overrides.
func TestMCPAgentInputIsChecked(t *testing.T) {
	d := daemontest.Start(t)
	url := "http://127.0.0.1:1/mcp"
	server := func(name, u string) string { return fmt.Sprintf(`{"type":"url","name":%q,"url":%q}`, name, u) }
	toolset := func(name string) string { return fmt.Sprintf(`{"type":"mcp_toolset","mcp_server_name":%q}`, name) }
	agent := func(servers, tools string) string {
		return `{"name":"a","model":"claude-sonnet-4-5","mcp_servers":[` + servers + `],"tools":[` + tools + `]}`
	}
	many := make([]string, 21)
	manyTools := make([]string, 21)
	for i := range many {
		many[i], manyTools[i] = server(fmt.Sprint("s", i), url), toolset(fmt.Sprint("s", i))
	}
	for _, c := range []struct{ name, body, field string }{
		{"unused server", agent(server("s", url), ""), `mcp_servers[0]`},
		{"toolset of no server", agent("", toolset("nope")), `tools[0].mcp_server_name`},
		{"duplicate names", agent(server("s", url)+","+server("s", url), toolset("s")), `mcp_servers[1].name`},
		{"not http", agent(server("s", "ftp://x/y"), toolset("s")), `mcp_servers[0].url`},
		{"credentials in the url", agent(server("s", "https://u:p@x/y"), toolset("s")), `mcp_servers[0].url`},
		{"empty name", agent(server("", url), toolset("s")), `mcp_servers[0].name`},
		{"long name", agent(server(strings.Repeat("n", 256), url), toolset("s")), `mcp_servers[0].name`},
		{"too many", agent(strings.Join(many, ","), strings.Join(manyTools, ",")), `mcp_servers`},
		{"stdio", agent(`{"type":"stdio","name":"s","url":"x"}`, toolset("s")), `mcp_servers[0].type`},
		{"no url", agent(`{"type":"url","name":"s"}`, toolset("s")), `mcp_servers[0].url`},
		{"unknown server key", agent(`{"type":"url","name":"s","url":"`+url+`","headers":{}}`, toolset("s")), `mcp_servers[0].headers`},
		{"two toolsets", agent(server("s", url), toolset("s")+","+toolset("s")), `tools[1].mcp_server_name`},
		{"auto policy", agent(server("s", url), `{"type":"mcp_toolset","mcp_server_name":"s","default_config":{"permission_policy":{"type":"auto"}}}`), `tools[0].default_config.permission_policy.type`},
		{"unknown policy", agent(server("s", url), `{"type":"mcp_toolset","mcp_server_name":"s","configs":[{"name":"x","permission_policy":{"type":"sometimes"}}]}`), `tools[0].configs[0].permission_policy.type`},
		{"config twice", agent(server("s", url), `{"type":"mcp_toolset","mcp_server_name":"s","configs":[{"name":"x"},{"name":"x"}]}`), `tools[0].configs[1].name`},
		{"config without name", agent(server("s", url), `{"type":"mcp_toolset","mcp_server_name":"s","configs":[{"enabled":false}]}`), `tools[0].configs[0].name`},
		{"unknown config key", agent(server("s", url), `{"type":"mcp_toolset","mcp_server_name":"s","configs":[{"name":"x","type":"x"}]}`), `tools[0].configs[0].type`},
		{"enabled not a bool", agent(server("s", url), `{"type":"mcp_toolset","mcp_server_name":"s","default_config":{"enabled":"yes"}}`), `tools[0].default_config.enabled`},
	} {
		code, out := call(t, "POST", d.URL+"/v1/agents", d.AdminKey, c.body, "Content-Type", "application/json")
		_, msg := errType(out)
		if code != 400 || !strings.Contains(msg, `"`+c.field+`"`) {
			t.Errorf("%s: %d %q, want 400 naming %q", c.name, code, msg, c.field)
		}
	}

	// Updates are checked against what is stored: dropping the servers
	// while a toolset uses them is refused.
	code, out := call(t, "POST", d.URL+"/v1/agents", d.AdminKey, agent(server("s", url), toolset("s")), "Content-Type", "application/json")
	if code != 200 {
		t.Fatalf("create: %d %v", code, out)
	}
	id := out["id"].(string)
	code, out = call(t, "POST", d.URL+"/v1/agents/"+id, d.AdminKey, `{"mcp_servers":[]}`, "Content-Type", "application/json")
	if _, msg := errType(out); code != 400 || !strings.Contains(msg, `"tools[0].mcp_server_name"`) {
		t.Errorf("update dropping the server: %d %q", code, msg)
	}
	// A session's overrides too.
	env := newEnv(t, sdkClient(d, d.AdminKey), "e")
	body := fmt.Sprintf(`{"environment_id":%q,"agent":{"type":"agent_with_overrides","id":%q,"tools":[%s]}}`, env.ID, id, toolset("other"))
	code, out = call(t, "POST", d.URL+"/v1/sessions", d.AdminKey, body, "Content-Type", "application/json")
	if _, msg := errType(out); code != 400 || !strings.Contains(msg, `"agent.tools[0].mcp_server_name"`) {
		t.Errorf("session override: %d %q", code, msg)
	}
}
