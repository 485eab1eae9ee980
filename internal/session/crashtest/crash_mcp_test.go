package crashtest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/mcp/mcptest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestCrashDuringMCPCall: the daemon is SIGKILLed while the MCP server is
// handling a tool call (the server signals that the call arrived). MCP has
// no idempotency key, so after the restart the call is not made again:
// the journal's started op becomes an ambiguous error result the model
// reads, and the turn completes. Exactly one call ever reached the server.
func TestCrashDuringMCPCall(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		srv := mcptest.New(t, mcptest.Options{})
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			if hasToolResult(r) {
				return anthropictest.Turn{Text: "I will check before retrying."}
			}
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "mcp__ext__echo", Input: map[string]any{"text": "hang"}}}}
		})
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newMCPSession(t, c, srv.URL)
		send(t, c, sid, "call the server")
		select {
		case <-srv.Arrived:
		case <-time.After(120 * time.Second):
			t.Fatalf("the MCP call never reached the server\n%s", n.logs())
		}
		n.kill()
		srv.Release() // its answer goes to a dead daemon
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		checkTrajectory(t, evs)
		uses, results := ofType(evs, "agent.mcp_tool_use"), ofType(evs, "agent.mcp_tool_result")
		if len(uses) != 1 || len(results) != 1 || len(ofType(evs, "session.status_rescheduled")) != 1 {
			t.Fatalf("trajectory %v", types(evs))
		}
		if !strings.Contains(results[0].Raw, `"is_error":true`) || !strings.Contains(results[0].text(), "may have executed; verify before retrying") {
			t.Fatalf("result after the crash: %s", results[0].Raw)
		}
		if msgs := ofType(evs, "agent.message"); len(msgs) == 0 || msgs[len(msgs)-1].text() != "I will check before retrying." {
			t.Fatalf("the turn did not complete: %v", types(evs))
		}
		if got := srv.Calls.Load(); got != 1 {
			t.Fatalf("%d calls reached the MCP server, want exactly 1", got)
		}
	})
}

// newMCPSession creates an agent whose only tools are MCP server ext's
// (always_allow), an environment and a session.
func newMCPSession(t testing.TB, c anthropic.Client, url string) string {
	t.Helper()
	ctx := context.Background()
	agent, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "crash-mcp", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "ext", URL: url, Type: anthropic.BetaManagedAgentsURLMCPServerParamsTypeURL}},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{
			Type: anthropic.BetaManagedAgentsMCPToolsetParamsTypeMCPToolset, MCPServerName: "ext",
			DefaultConfig: anthropic.BetaManagedAgentsMCPToolsetDefaultConfigParams{PermissionPolicy: anthropic.BetaManagedAgentsMCPToolsetDefaultConfigParamsPermissionPolicyUnion{
				OfAlwaysAllow: &anthropic.BetaManagedAgentsAlwaysAllowPolicyParam{Type: anthropic.BetaManagedAgentsAlwaysAllowPolicyTypeAlwaysAllow}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "crash-mcp"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agent.ID)}, EnvironmentID: env.ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}
