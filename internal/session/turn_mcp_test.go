package session

import (
	"context"
	"encoding/json"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/mcp/mcptest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/store"
)

const mcpToken = "mcp-bearer-1234"

// fakeVaults is the MCPAuthorizer of the tests: the token for one URL.
type fakeVaults struct {
	url string
	mu  sync.Mutex
	got [][]string // vault ids of each lookup
}

func (f *fakeVaults) MCPAuthorization(_ context.Context, tenantID string, vaultIDs []string, serverURL string) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.got = append(f.got, append([]string{tenantID}, vaultIDs...))
	if serverURL != f.url {
		return "", nil
	}
	return mcpToken, nil
}

// mcpModel calls the echo tool of server srv with the text after "echo:"
// in the user's message, and answers a tool result with "done: <result>".
func mcpModel(r anthropictest.Request) anthropictest.Turn {
	blocks := r.Blocks(len(r.Messages) - 1)
	for _, b := range blocks {
		if b.Type == "tool_result" {
			return turn{Text: "done: " + b.ToolResultText()}
		}
	}
	if _, arg, ok := strings.Cut(blocks[len(blocks)-1].Text, "echo:"); ok {
		return turn{ToolUses: []tu{{Name: "mcp__srv__echo", Input: map[string]any{"text": arg}}}}
	}
	return turn{Text: "nothing to call"}
}

// mcpEnv is a runtime whose vaults know the test server's token.
func mcpEnv(t *testing.T, srvURL string, opts ...func(*RuntimeConfig)) (*rtEnv, *fakeVaults) {
	fv := &fakeVaults{url: srvURL}
	opts = append([]func(*RuntimeConfig){func(c *RuntimeConfig) { c.MCPAuth = fv }}, opts...)
	return newRTEnv(t, mcpModel, false, opts...), fv
}

// mcpSession creates an agent with server srv at url and the mcp_toolset
// toolset (JSON), and a session with vault ids.
func (e *rtEnv) mcpSession(t testing.TB, url, toolset string) *store.ManagedSession {
	t.Helper()
	ctx := context.Background()
	doc := `{"name":"mcp","model":{"id":"claude-test"},"mcp_servers":[{"type":"url","name":"srv","url":"` + url + `"}],"tools":[` + toolset + `]}`
	a, err := e.st.CreateAgent(ctx, &store.Agent{TenantID: "t1", Doc: json.RawMessage(doc)})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: "t1", AgentID: a.ID, AgentVersion: a.Version,
		Doc: json.RawMessage(`{"vault_ids":["vlt_a","vlt_b"]}`)})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const allowAll = `{"type":"mcp_toolset","mcp_server_name":"srv","default_config":{"permission_policy":{"type":"always_allow"}}}`

type mcpEvent struct {
	Name                string           `json:"name"`
	MCPServerName       string           `json:"mcp_server_name"`
	Input               map[string]any   `json:"input"`
	EvaluatedPermission string           `json:"evaluated_permission"`
	MCPToolUseID        string           `json:"mcp_tool_use_id"`
	Content             []map[string]any `json:"content"`
	IsError             bool             `json:"is_error"`
	Error               struct {
		Type          string `json:"type"`
		MCPServerName string `json:"mcp_server_name"`
		Message       string `json:"message"`
	} `json:"error"`
}

func mcpBody(t *testing.T, ev store.SessionEvent) mcpEvent {
	t.Helper()
	var b mcpEvent
	if err := json.Unmarshal(ev.Data, &b); err != nil {
		t.Fatal(err)
	}
	return b
}

func resultText(b mcpEvent) string {
	var s string
	for _, c := range b.Content {
		s += c["text"].(string)
	}
	return s
}

func offered(r anthropictest.Request) []string {
	var names []string
	for _, raw := range r.Tools {
		var m struct{ Name string }
		_ = json.Unmarshal(raw, &m)
		names = append(names, m.Name)
	}
	return names
}

func TestMCPToolCallReachesTheServerWithTheBearer(t *testing.T) {
	srv := mcptest.New(t, mcptest.Options{Token: mcpToken})
	e, fv := mcpEnv(t, srv.URL)
	s := e.mcpSession(t, srv.URL, allowAll)
	st := e.follow(t, s.ID)
	e.say(t, s.ID, "echo:hello")
	use := st.untilType(EventAgentMCPToolUse)
	ub := mcpBody(t, use)
	if ub.Name != "echo" || ub.MCPServerName != "srv" || ub.Input["text"] != "hello" || ub.EvaluatedPermission != "allow" {
		t.Fatalf("agent.mcp_tool_use %s", use.Data)
	}
	res := st.untilType(EventAgentMCPToolResult)
	rb := mcpBody(t, res)
	if rb.MCPToolUseID != use.ID || rb.IsError || resultText(rb) != "echo: hello" || rb.Content[0]["type"] != "text" {
		t.Fatalf("agent.mcp_tool_result %s", res.Data)
	}
	if stopType(t, st.untilType(EventStatusIdle)) != StopEndTurn {
		t.Fatalf("events %v", st.types())
	}
	reqs := e.fake.Requests()
	if !slices.Contains(offered(reqs[0]), "mcp__srv__echo") {
		t.Fatalf("tools offered %v", offered(reqs[0]))
	}
	if last := reqs[len(reqs)-1].AllBlocks(); !slices.ContainsFunc(last, func(b anthropictest.Block) bool {
		return b.Type == "tool_result" && b.ToolResultText() == "echo: hello"
	}) {
		t.Fatalf("the model never saw the result: %+v", last)
	}
	if srv.Calls.Load() != 1 {
		t.Fatalf("%d calls reached the server", srv.Calls.Load())
	}
	for _, a := range srv.Authorizations() {
		if a != "Bearer "+mcpToken {
			t.Fatalf("a request to the server carried %q", a)
		}
	}
	if len(fv.got) == 0 || strings.Join(fv.got[0], ",") != "t1,vlt_a,vlt_b" {
		t.Fatalf("vault lookups %v", fv.got)
	}
	ops, err := e.st.ListOps(context.Background(), s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(ops, func(op *store.Op) bool {
		return op.Kind == journal.KindMCPCall && op.Status == store.OpCompleted && strings.Contains(string(op.Result), "echo: hello")
	}) {
		t.Fatalf("no completed mcp_call op in %+v", ops)
	}
}

func TestMCPAlwaysAskWaitsForConfirmation(t *testing.T) {
	srv := mcptest.New(t, mcptest.Options{Token: mcpToken})
	e, _ := mcpEnv(t, srv.URL)
	// No default_config: MCP tools ask (the hosted default).
	s := e.mcpSession(t, srv.URL, `{"type":"mcp_toolset","mcp_server_name":"srv"}`)
	st := e.follow(t, s.ID)

	e.say(t, s.ID, "echo:first")
	use := st.untilType(EventAgentMCPToolUse)
	if b := mcpBody(t, use); b.EvaluatedPermission != "ask" {
		t.Fatalf("agent.mcp_tool_use %s", use.Data)
	}
	idle := st.untilType(EventStatusIdle)
	if stopType(t, idle) != StopRequiresAction || !strings.Contains(string(idle.Data), use.ID) {
		t.Fatalf("idle %s", idle.Data)
	}
	if srv.Calls.Load() != 0 {
		t.Fatal("the call ran before it was confirmed")
	}
	e.send(t, s.ID, EventUserToolConfirmation, map[string]any{"tool_use_id": use.ID, "result": "allow"})
	res := st.untilType(EventAgentMCPToolResult)
	if b := mcpBody(t, res); b.IsError || resultText(b) != "echo: first" || b.MCPToolUseID != use.ID {
		t.Fatalf("result %s", res.Data)
	}
	if stopType(t, st.untilType(EventStatusIdle)) != StopEndTurn || srv.Calls.Load() != 1 {
		t.Fatalf("events %v, calls %d", st.types(), srv.Calls.Load())
	}

	e.say(t, s.ID, "echo:second")
	use = st.untilType(EventAgentMCPToolUse)
	st.untilType(EventStatusIdle)
	e.send(t, s.ID, EventUserToolConfirmation, map[string]any{"tool_use_id": use.ID, "result": "deny", "deny_message": "not today"})
	res = st.untilType(EventAgentMCPToolResult)
	if b := mcpBody(t, res); !b.IsError || !strings.Contains(resultText(b), "denied") || !strings.Contains(resultText(b), "not today") {
		t.Fatalf("denied result %s", res.Data)
	}
	if stopType(t, st.untilType(EventStatusIdle)) != StopEndTurn || srv.Calls.Load() != 1 {
		t.Fatalf("events %v, calls %d", st.types(), srv.Calls.Load())
	}
}

func TestMCPFailuresAreToolErrorsNotFailedTurns(t *testing.T) {
	t.Run("isError result", func(t *testing.T) {
		srv := mcptest.New(t, mcptest.Options{Token: mcpToken})
		e, _ := mcpEnv(t, srv.URL)
		s := e.mcpSession(t, srv.URL, allowAll)
		st := e.follow(t, s.ID)
		e.say(t, s.ID, "echo:fail")
		b := mcpBody(t, st.untilType(EventAgentMCPToolResult))
		if !b.IsError || resultText(b) != "echo failed on purpose" {
			t.Fatalf("result %+v", b)
		}
		endsNormally(t, st)
	})
	t.Run("hangs past the timeout", func(t *testing.T) {
		srv := mcptest.New(t, mcptest.Options{Token: mcpToken})
		e, _ := mcpEnv(t, srv.URL, func(c *RuntimeConfig) { c.MCPCallTimeout = 200 * time.Millisecond })
		s := e.mcpSession(t, srv.URL, allowAll)
		st := e.follow(t, s.ID)
		e.say(t, s.ID, "echo:hang")
		b := mcpBody(t, st.untilType(EventAgentMCPToolResult))
		if !b.IsError || !strings.Contains(resultText(b), "did not answer within") {
			t.Fatalf("result %+v", b)
		}
		endsNormally(t, st)
	})
	t.Run("down", func(t *testing.T) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		url := "http://" + ln.Addr().String() + "/mcp"
		ln.Close()
		e, _ := mcpEnv(t, url)
		s := e.mcpSession(t, url, allowAll)
		st := e.follow(t, s.ID)
		e.say(t, s.ID, "hello")
		b := mcpBody(t, st.untilType(EventSessionError))
		if b.Error.Type != errMCPConnection || b.Error.MCPServerName != "srv" {
			t.Fatalf("session.error %+v", b)
		}
		endsNormally(t, st)
		if names := offered(e.fake.Requests()[0]); slices.Contains(names, "mcp__srv__echo") {
			t.Fatalf("the tools of a server that is down were offered: %v", names)
		}
	})
	t.Run("refuses the token", func(t *testing.T) {
		srv := mcptest.New(t, mcptest.Options{Token: "another-token"})
		e, _ := mcpEnv(t, srv.URL)
		s := e.mcpSession(t, srv.URL, allowAll)
		st := e.follow(t, s.ID)
		e.say(t, s.ID, "hello")
		b := mcpBody(t, st.untilType(EventSessionError))
		if b.Error.Type != errMCPAuth || b.Error.MCPServerName != "srv" || strings.Contains(b.Error.Message, mcpToken) {
			t.Fatalf("session.error %+v", b)
		}
		endsNormally(t, st)
	})
	t.Run("confirmed call to a server down since", func(t *testing.T) {
		srv := mcptest.New(t, mcptest.Options{Token: mcpToken})
		e, _ := mcpEnv(t, srv.URL)
		s := e.mcpSession(t, srv.URL, `{"type":"mcp_toolset","mcp_server_name":"srv"}`)
		st := e.follow(t, s.ID)
		e.say(t, s.ID, "echo:later")
		use := st.untilType(EventAgentMCPToolUse)
		st.untilType(EventStatusIdle)
		srv.Close()
		e.send(t, s.ID, EventUserToolConfirmation, map[string]any{"tool_use_id": use.ID, "result": "allow"})
		b := mcpBody(t, st.untilType(EventAgentMCPToolResult))
		if !b.IsError || !strings.Contains(resultText(b), "not connected") {
			t.Fatalf("result %+v", b)
		}
		endsNormally(t, st)
	})
}

// endsNormally: the turn ends with end_turn and the model answered.
func endsNormally(t *testing.T, st *stream) {
	t.Helper()
	idle := st.untilType(EventStatusIdle)
	if stopType(t, idle) != StopEndTurn {
		t.Fatalf("idle %s; events %v", idle.Data, st.types())
	}
	for _, ev := range st.all {
		if ev.Type == EventSessionError && !strings.Contains(string(ev.Data), "mcp_") {
			t.Fatalf("the turn failed: %s", ev.Data)
		}
	}
	if st.count(EventAgentMessage) == 0 {
		t.Fatalf("the model never answered: %v", st.types())
	}
}
