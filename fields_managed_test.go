package agentkernel_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"mime/multipart"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/mcp/mcptest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestEveryManagedFieldWorksOrIsRefused walks every field of every
// Managed Agents request body anthropic-sdk-go can send (found by
// reflection over its param types) and sends each one set to a
// non-default value. Each must either have an effect this test observes —
// the model sees it, the turn changes, it is stored and returned where
// that is its purpose — or be refused with a 400 naming it. A field the SDK
// gains fails here until it is classified below.
func TestEveryManagedFieldWorksOrIsRefused(t *testing.T) {
	w := newManagedWalker(t)
	bodies := []walkBody{
		{"agent.create", anthropic.BetaAgentNewParams{}},
		{"agent.update", anthropic.BetaAgentUpdateParams{}},
		{"environment.create", anthropic.BetaEnvironmentNewParams{}},
		{"environment.update", anthropic.BetaEnvironmentUpdateParams{}},
		{"session.create", anthropic.BetaSessionNewParams{}},
		{"session.update", anthropic.BetaSessionUpdateParams{}},
		{"events.send", anthropic.BetaSessionEventSendParams{}},
		// BetaSessionResourceAddParams sends its file resource as the body.
		{"resource.add", anthropic.BetaManagedAgentsFileResourceParams{}},
		{"resource.update", anthropic.BetaSessionResourceUpdateParams{}},
	}
	rules := managedRules(w)
	n := walkBodies(t, rules, bodies, w.newCase)
	t.Logf("%d fields checked", n)
}

// managedWalker is a daemon whose "walk-*" models are a fake Anthropic
// API, so a check can see exactly what the model was sent.
type managedWalker struct {
	d     *daemontest.Daemon
	fake  *anthropictest.Server
	c     anthropic.Client
	seq   atomic.Int64
	envID string
	// hostedEnvID is a self_hosted environment, made at first use.
	hostedEnvID string
	// mcpURL is a real MCP server (one echo tool) agents may name.
	mcpURL string
}

func newManagedWalker(t *testing.T) *managedWalker {
	w := &managedWalker{}
	w.fake = anthropictest.New(t, fakeModel)
	w.mcpURL = mcptest.New(t, mcptest.Options{}).URL
	w.d = daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"walk-*": {Provider: "anthropic", BaseURL: w.fake.URL, APIKey: "sk-walk"}}
	})
	w.c = sdkClient(w.d, w.d.AdminKey)
	w.envID = w.post(t, "/v1/environments", map[string]any{"name": "walk"})["id"].(string)
	return w
}

// fakeModel answers "call:NAME" in the newest user text with a call of tool
// NAME (when it is offered and not yet called), "hang" by hanging, and
// anything else with "ok".
func fakeModel(r anthropictest.Request) anthropictest.Turn {
	var last string
	for i := len(r.Messages) - 1; i >= 0 && last == ""; i-- {
		if r.Messages[i].Role != "user" {
			continue
		}
		for _, b := range r.Blocks(i) {
			if b.Type == "tool_result" {
				return anthropictest.Turn{Text: "ok"}
			}
			last += b.Text
		}
	}
	if strings.Contains(last, "hang") {
		return anthropictest.Turn{Hang: true}
	}
	if _, name, ok := strings.Cut(last, "call:"); ok {
		name, _, _ = strings.Cut(name, " ")
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{ID: "toolu_walk", Name: name, Input: map[string]any{"command": "true", "file_path": "x", "pattern": "x"}}}}
	}
	return anthropictest.Turn{Text: "ok"}
}

func (w *managedWalker) marker() string { return fmt.Sprintf("walk-%d", w.seq.Add(1)) }

func (w *managedWalker) do(t *testing.T, method, path string, body any) (int, map[string]any) {
	t.Helper()
	raw := ""
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		raw = string(b)
	}
	return call(t, method, w.d.URL+path, w.d.AdminKey, raw, "Content-Type", "application/json")
}

// post must succeed.
func (w *managedWalker) post(t *testing.T, path string, body any) map[string]any {
	t.Helper()
	code, out := w.do(t, "POST", path, body)
	if code != 200 {
		t.Fatalf("POST %s %v: %d %v", path, body, code, out)
	}
	return out
}

// agent creates an agent on a walk model with fields.
func (w *managedWalker) agent(t *testing.T, fields map[string]any) string {
	t.Helper()
	body := map[string]any{"name": "walk", "model": "walk-model"}
	for k, v := range fields {
		body[k] = v
	}
	return w.post(t, "/v1/agents", body)["id"].(string)
}

func (w *managedWalker) session(t *testing.T, agentID string) string {
	t.Helper()
	return w.post(t, "/v1/sessions", map[string]any{"agent": agentID, "environment_id": w.envID})["id"].(string)
}

// events lists a session's events.
func (w *managedWalker) events(t *testing.T, sessionID string) []map[string]any {
	t.Helper()
	code, out := w.do(t, "GET", "/v1/sessions/"+sessionID+"/events?limit=1000", nil)
	if code != 200 {
		t.Fatalf("events: %d %v", code, out)
	}
	var evs []map[string]any
	for _, e := range out["data"].([]any) {
		evs = append(evs, e.(map[string]any))
	}
	return evs
}

// waitIdle waits until the session has more than after session.status_idle
// events, and returns its events.
func (w *managedWalker) waitIdle(t *testing.T, sessionID string, after int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		evs := w.events(t, sessionID)
		idle := 0
		for _, e := range evs {
			if e["type"] == "session.status_idle" {
				idle++
			}
		}
		if idle > after {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s did not go idle; events %v", sessionID, evs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func idleCount(evs []map[string]any) int {
	n := 0
	for _, e := range evs {
		if e["type"] == "session.status_idle" {
			n++
		}
	}
	return n
}

// say sends a user message and waits for the turn to end.
func (w *managedWalker) say(t *testing.T, sessionID, text string) []map[string]any {
	t.Helper()
	before := idleCount(w.events(t, sessionID))
	w.post(t, "/v1/sessions/"+sessionID+"/events", map[string]any{"events": []any{
		map[string]any{"type": "user.message", "content": []any{map[string]any{"type": "text", "text": text}}}}})
	return w.waitIdle(t, sessionID, before)
}

// requestWith is the newest model request whose user text holds s.
func (w *managedWalker) requestWith(t *testing.T, s string) anthropictest.Request {
	t.Helper()
	reqs := w.fake.Requests()
	for i := len(reqs) - 1; i >= 0; i-- {
		for _, b := range reqs[i].AllBlocks() {
			if strings.Contains(b.Text, s) || strings.Contains(b.ToolResultText(), s) {
				return reqs[i]
			}
		}
	}
	t.Fatalf("no model request holds %q", s)
	return anthropictest.Request{}
}

// newCase prepares a case: what the body sets and how it is sent.
// walkBody is one request body a field walk covers: its rule name and its
// SDK type.
type walkBody struct {
	name string
	typ  any
}

// walkBodies checks every field of bodies against the first rule that
// classifies it (its check, or a refusal, on the case newCase builds) and
// returns how many it checked; a field no rule classifies is an error.
func walkBodies(t *testing.T, rules []fieldRule, bodies []walkBody,
	newCase func(*testing.T, string, reflect.Type, leaf, fieldRule) *fieldCase) int {
	n := 0
	for _, b := range bodies {
		typ := reflect.TypeOf(b.typ)
		for _, l := range walkFields(typ) {
			r, ok := classify(rules, b.name, l)
			if !ok {
				t.Errorf("%s %s (%v): no rule says what this field does; make it work and check it here, or refuse it as not supported yet", b.name, l.path, l.typ)
				continue
			}
			n++
			c := newCase(t, b.name, typ, l, r)
			if r.check != nil {
				r.check(t, c)
			} else {
				expectRefused(t, c, r.refused)
			}
		}
	}
	return n
}

func (w *managedWalker) newCase(t *testing.T, body string, typ reflect.Type, l leaf, r fieldRule) *fieldCase {
	c := &fieldCase{body: body, leaf: l, marker: w.marker(), state: map[string]any{}}
	fill := func(p string) (any, bool) {
		switch {
		case p == ".model" || strings.HasSuffix(p, ".model.id"):
			return "walk-model", true
		case strings.HasSuffix(p, "<OfCustom>.name"):
			return "walk_tool", true
		case strings.HasSuffix(p, "<OfCustom>.input_schema"):
			return map[string]any{"type": "object"}, true
		case strings.HasSuffix(p, ".text"), strings.HasSuffix(p, ".data"):
			return c.marker, true
		case strings.HasSuffix(p, "<OfUserMessage>.content"):
			return []any{map[string]any{"type": "text", "text": c.marker}}, true
		case strings.HasSuffix(p, "<OfUserDefineOutcome>.description") && !strings.HasSuffix(c.leaf.path, ".description"):
			return "walk outcome", true
		case strings.HasSuffix(p, "<OfUserDefineOutcome>.rubric<OfText>.content") && !strings.HasSuffix(c.leaf.path, ".content"):
			return "walk rubric", true
		case strings.HasSuffix(p, "<OfUserDefineOutcome>.rubric") && !strings.Contains(c.leaf.path, ".rubric"):
			return map[string]any{"type": "text", "content": "walk rubric"}, true
		case strings.HasSuffix(p, ".result"):
			return "deny", true
		case strings.HasSuffix(p, ".mcp_servers[].url"):
			return w.mcpURL, true
		case strings.HasSuffix(p, ".mcp_servers[].name"), strings.HasSuffix(p, "<OfMCPToolset>.mcp_server_name"):
			return "walksrv", true
		case strings.HasSuffix(p, "<OfMCPToolset>.configs[].name"):
			return "echo", true
		}
		if v, ok := c.state["fill"+p]; ok {
			return v, true
		}
		return nil, false
	}
	var base map[string]any
	var method, path string
	switch body {
	case "agent.create":
		base, method, path = map[string]any{"name": "walk", "model": "walk-model"}, "POST", "/v1/agents"
	case "agent.update":
		id := w.agent(t, nil)
		c.state["agent"] = id
		base, method, path = map[string]any{}, "POST", "/v1/agents/"+id
	case "environment.create":
		base, method, path = map[string]any{"name": "walk"}, "POST", "/v1/environments"
	case "environment.update":
		id := w.post(t, "/v1/environments", map[string]any{"name": "walk"})["id"].(string)
		base, method, path = map[string]any{}, "POST", "/v1/environments/"+id
	case "session.create":
		// The agent has a system prompt of its own, so a check can tell it
		// from another agent; version 1 and 2 differ.
		id := w.agent(t, map[string]any{"system": "v1 of " + c.marker})
		w.post(t, "/v1/agents/"+id, map[string]any{"system": "v2 of " + c.marker})
		c.state["agent"] = id
		c.state["fill.agent<OfBetaManagedAgentsAgents>.id"] = id
		c.state["fill.agent<OfBetaManagedAgentsAgentWithOverridess>.id"] = id
		base, method, path = map[string]any{"agent": id, "environment_id": w.envID}, "POST", "/v1/sessions"
	case "session.update":
		id := w.session(t, w.agent(t, nil))
		c.state["session"] = id
		base, method, path = map[string]any{}, "POST", "/v1/sessions/"+id
	case "events.send":
		base, method, path = map[string]any{}, "POST", ""
	case "resource.add":
		id := w.session(t, w.agent(t, nil))
		c.state["session"] = id
		base, method, path = map[string]any{}, "POST", "/v1/sessions/"+id+"/resources"
	case "resource.update":
		s := w.post(t, "/v1/sessions", map[string]any{"agent": w.agent(t, nil), "environment_id": w.envID,
			"resources": []any{map[string]any{"type": "github_repository", "url": "https://github.com/o/walk"}}})
		rid := jsonAt(s, ".resources[0].id").(string)
		c.state["session"], c.state["resource"] = s["id"], rid
		base, method, path = map[string]any{}, "POST", "/v1/sessions/"+s["id"].(string)+"/resources/"+rid
	case "deployment.create", "deployment.update":
		// The agent's versions differ, so a check can tell which one a
		// run's session runs.
		id := w.agent(t, map[string]any{"system": "v1 of " + c.marker})
		w.post(t, "/v1/agents/"+id, map[string]any{"system": "v2 of " + c.marker})
		c.state["agent"] = id
		c.state["fill.agent<OfBetaManagedAgentsAgents>.id"] = id
		dep := map[string]any{"agent": id, "environment_id": w.envID, "name": "walk",
			"initial_events": []any{map[string]any{"type": "user.message", "content": []any{map[string]any{"type": "text", "text": "walk"}}}}}
		base, method, path = dep, "POST", "/v1/deployments"
		if body == "deployment.update" {
			did := w.post(t, "/v1/deployments", dep)["id"].(string)
			c.state["deployment"] = did
			base, path = map[string]any{}, "/v1/deployments/"+did
		}
	default:
		t.Fatalf("no sender for %s", body)
	}
	// The value last: a rule's value may set up what it refers to (a call
	// waiting for its result, in a session of its own).
	c.value = r.valueFor(t, c)
	if body == "events.send" && c.state["session"] == nil {
		c.state["session"] = w.session(t, w.agent(t, nil))
	}
	c.send = func() (int, map[string]any) {
		top := synth(t, typ, l.steps, c.value, fill).(map[string]any)
		for k, v := range top {
			base[k] = v
		}
		if x, ok := c.state["extra"].(map[string]any); ok {
			mergeJSON(base, x)
		}
		p := path
		if p == "" {
			p = "/v1/sessions/" + c.state["session"].(string) + "/events"
		}
		c.state["sent"] = base
		return w.do(t, method, p, base)
	}
	return c
}

// mergeJSON adds src to dst: objects merge, arrays append, anything else
// is set where dst has nothing.
func mergeJSON(dst, src map[string]any) {
	for k, v := range src {
		switch d := dst[k].(type) {
		case map[string]any:
			if s, ok := v.(map[string]any); ok {
				mergeJSON(d, s)
				continue
			}
		case []any:
			if s, ok := v.([]any); ok {
				dst[k] = append(d, s...)
				continue
			}
		case nil:
			dst[k] = v
		}
	}
}

// ok sends the case and requires a 200.
func ok(t *testing.T, c *fieldCase) map[string]any {
	t.Helper()
	code, out := c.send()
	if code != 200 {
		t.Errorf("%s %s = %v: %d %v, want it accepted", c.body, c.leaf.path, c.value, code, out)
		return nil
	}
	return out
}

// respPrefix is where the agent's fields are in the answer to c's body.
func respPrefix(c *fieldCase) string {
	if strings.HasPrefix(c.body, "session.") {
		return ".agent"
	}
	return ""
}

// echoes checks that the answer (and a later GET of the resource) holds
// the value at path: for fields whose purpose is to be stored and returned.
func (w *managedWalker) echoes(path string) func(*testing.T, *fieldCase) {
	return func(t *testing.T, c *fieldCase) {
		out := ok(t, c)
		if out == nil {
			return
		}
		kind := map[string]string{"agent": "agents", "environment": "environments", "session": "sessions", "deployment": "deployments"}[strings.Split(c.body, ".")[0]]
		_, got := w.do(t, "GET", "/v1/"+kind+"/"+out["id"].(string), nil)
		for _, o := range []map[string]any{out, got} {
			holds(t, c, path, jsonAt(o, path), c.value)
		}
	}
}

// echoesAgent is echoes for an agent field, which a session's answer has
// under "agent".
func (w *managedWalker) echoesAgent(path string) func(*testing.T, *fieldCase) {
	return func(t *testing.T, c *fieldCase) { w.echoes(respPrefix(c)+path)(t, c) }
}

// sessionOf is the session a case's agent fields apply to: a new session
// of the agent it created or updated, or the session it created or updated.
func (w *managedWalker) sessionOf(t *testing.T, c *fieldCase, out map[string]any) string {
	switch c.body {
	case "agent.create":
		return w.session(t, out["id"].(string))
	case "agent.update":
		return w.session(t, c.state["agent"].(string))
	case "session.update":
		return c.state["session"].(string)
	}
	return out["id"].(string)
}

// modelSees checks that a turn in the case's session sends the model a
// request for which see holds.
func (w *managedWalker) modelSees(what string, see func(r anthropictest.Request, c *fieldCase) bool) func(*testing.T, *fieldCase) {
	return func(t *testing.T, c *fieldCase) {
		out := ok(t, c)
		if out == nil {
			return
		}
		s := w.sessionOf(t, c, out)
		w.say(t, s, "hello "+c.marker)
		if r := w.requestWith(t, c.marker); !see(r, c) {
			t.Errorf("%s %s = %v: the model was not sent %s (system %s, model %s, tools %s)", c.body, c.leaf.path, c.value, what, r.System, r.Model, r.Tools)
		}
	}
}

// toolsOf decodes the tools of a model request.
func toolsOf(r anthropictest.Request) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, raw := range r.Tools {
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		name, _ := m["name"].(string)
		out[name] = m
	}
	return out
}

var toolsetTools = []string{"bash", "read", "write", "edit", "glob", "grep"}

// asks checks that the tool's call waits for a user.tool_confirmation.
func (w *managedWalker) asks(t *testing.T, c *fieldCase, tool string) {
	out := ok(t, c)
	if out == nil {
		return
	}
	s := w.sessionOf(t, c, out)
	evs := w.say(t, s, "call:"+tool+" "+c.marker)
	for _, e := range evs {
		if e["type"] == "agent.tool_use" && e["name"] == tool {
			if e["evaluated_permission"] != "ask" {
				t.Errorf("%s %s: %s ran with permission %v, want ask", c.body, c.leaf.path, tool, e["evaluated_permission"])
			}
			return
		}
	}
	t.Errorf("%s %s: no agent.tool_use of %s in %v", c.body, c.leaf.path, tool, evs)
}

// pendingCall starts a turn in a new session of an agent with fields whose
// model calls tool, and returns the session and the waiting call's event id.
func (w *managedWalker) pendingCall(t *testing.T, c *fieldCase, fields map[string]any, tool, eventType string) {
	s := w.session(t, w.agent(t, fields))
	evs := w.say(t, s, "call:"+tool+" "+c.marker)
	for _, e := range evs {
		if e["type"] == eventType {
			c.state["session"] = s
			c.state["call"] = e["id"]
			return
		}
	}
	t.Fatalf("no %s in %v", eventType, evs)
}

// pendingCustomCall is pendingCall of a custom tool, the call's id filled
// into the case's custom_tool_use_id.
func (w *managedWalker) pendingCustomCall(t *testing.T, c *fieldCase) {
	w.pendingCall(t, c, map[string]any{"tools": []any{map[string]any{"type": "custom", "name": "walk_tool", "input_schema": map[string]any{"type": "object"}}}},
		"walk_tool", "agent.custom_tool_use")
	c.state["fill.events[]<OfUserCustomToolResult>.custom_tool_use_id"] = c.state["call"]
}

// pendingRemoteCall is pendingCall of a bash call in a self_hosted
// environment's session: the turn waits for a worker's user.tool_result.
func (w *managedWalker) pendingRemoteCall(t *testing.T, c *fieldCase) {
	if w.hostedEnvID == "" {
		w.hostedEnvID = w.post(t, "/v1/environments", map[string]any{"name": "walk-hosted", "config": map[string]any{"type": "self_hosted"}})["id"].(string)
	}
	agentID := w.agent(t, map[string]any{"tools": []any{map[string]any{"type": "agent_toolset_20260401"}}})
	s := w.post(t, "/v1/sessions", map[string]any{"agent": agentID, "environment_id": w.hostedEnvID})["id"].(string)
	for _, e := range w.say(t, s, "call:bash "+c.marker) {
		if e["type"] == "agent.tool_use" {
			c.state["session"], c.state["call"] = s, e["id"]
			c.state["fill.events[]<OfUserToolResult>.tool_use_id"] = e["id"]
			return
		}
	}
	t.Fatalf("no agent.tool_use in session %s", s)
}

// resumes sends a case that answers the pending call and checks what the
// model then sees as the call's result.
func (w *managedWalker) resumes(t *testing.T, c *fieldCase, see func(b anthropictest.Block) bool) {
	s := c.state["session"].(string)
	before := idleCount(w.events(t, s))
	if ok(t, c) == nil {
		return
	}
	w.waitIdle(t, s, before)
	reqs := w.fake.Requests()
	for _, b := range reqs[len(reqs)-1].AllBlocks() {
		if b.Type == "tool_result" && see(b) {
			return
		}
	}
	t.Errorf("%s %s = %v: the model's last request has no matching tool result: %+v", c.body, c.leaf.path, c.value, reqs[len(reqs)-1].AllBlocks())
}

// mcpValue is the value of an MCP field, and sets up the rest of a valid
// body: the toolset of a server (or the server of a toolset) in
// state["extra"], and for a per-tool policy a toolset default that
// differs from it, so the check sees the field's own effect.
func (w *managedWalker) mcpValue(t *testing.T, c *fieldCase) any {
	p := c.leaf.path
	var v any
	switch {
	case strings.HasSuffix(p, ".mcp_servers[].url"):
		v = w.mcpURL
	case strings.Contains(p, ".mcp_servers[]") && strings.HasSuffix(p, ".type"):
		v = "url"
	case strings.HasSuffix(p, "<OfMCPToolset>.type"):
		v = "mcp_toolset"
	case strings.HasSuffix(p, ".mcp_servers[].name"), strings.HasSuffix(p, ".mcp_server_name"):
		v = c.marker
	case strings.HasSuffix(p, ".configs[].name"):
		v = "echo"
	case strings.HasSuffix(p, ".enabled"):
		v = false
	default:
		_, after, _ := strings.Cut(p, "permission_policy<Of")
		name, _, _ := strings.Cut(after, ">")
		v = map[string]string{"AlwaysAsk": "always_ask", "AlwaysAllow": "always_allow", "Auto": "auto"}[name]
	}
	server := "walksrv"
	if s, ok := v.(string); ok && (strings.HasSuffix(p, ".name") && strings.Contains(p, ".mcp_servers[]") || strings.HasSuffix(p, ".mcp_server_name")) {
		server = s
	}
	c.state["mcp_server"] = server
	other := map[string]any{"mcp_servers": []any{map[string]any{"type": "url", "name": server, "url": w.mcpURL}}}
	if strings.Contains(p, ".mcp_servers[]") {
		other = map[string]any{"tools": []any{map[string]any{"type": "mcp_toolset", "mcp_server_name": server}}}
	}
	if strings.HasPrefix(p, ".agent") {
		other = map[string]any{"agent": other}
	}
	c.state["extra"] = other
	if i := strings.Index(p, ".configs[].permission_policy"); i >= 0 {
		def := "always_allow"
		if v == "always_allow" {
			def = "always_ask"
		}
		c.state["fill"+p[:i]+".default_config"] = map[string]any{"permission_policy": map[string]any{"type": def}}
	}
	return v
}

// seesMCPTool checks whether the model is offered the MCP server's tool.
func (w *managedWalker) seesMCPTool(want bool) func(*testing.T, *fieldCase) {
	return w.modelSees("the MCP server's echo tool (or not)", func(r anthropictest.Request, c *fieldCase) bool {
		return (toolsOf(r)["mcp__"+c.state["mcp_server"].(string)+"__echo"] != nil) == want
	})
}

// mcpPermission checks that a call of the MCP tool is evaluated as perm.
func (w *managedWalker) mcpPermission(perm string) func(*testing.T, *fieldCase) {
	return func(t *testing.T, c *fieldCase) {
		out := ok(t, c)
		if out == nil {
			return
		}
		s := w.sessionOf(t, c, out)
		server := c.state["mcp_server"].(string)
		evs := w.say(t, s, "call:mcp__"+server+"__echo "+c.marker)
		for _, e := range evs {
			if e["type"] == "agent.mcp_tool_use" && e["mcp_server_name"] == server {
				if e["evaluated_permission"] != perm {
					t.Errorf("%s %s: the MCP tool ran with permission %v, want %s", c.body, c.leaf.path, e["evaluated_permission"], perm)
				}
				return
			}
		}
		t.Errorf("%s %s: no agent.mcp_tool_use of %s in %v", c.body, c.leaf.path, server, evs)
	}
}

// upload stores a File through /v1/files and returns its id.
func (w *managedWalker) upload(t *testing.T, name, content string) string {
	t.Helper()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	part, err := mw.CreateFormFile("file", name)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = part.Write([]byte(content))
	_ = mw.Close()
	code, out := call(t, "POST", w.d.URL+"/v1/files", w.d.AdminKey, body.String(), "Content-Type", mw.FormDataContentType())
	if code != 200 {
		t.Fatalf("upload %s: %d %v", name, code, out)
	}
	return out["id"].(string)
}

// memoryStore creates a memory store named after marker and returns its id.
func (w *managedWalker) memoryStore(t *testing.T, marker string) string {
	t.Helper()
	return w.post(t, "/v1/memory_stores", map[string]any{"name": marker})["id"].(string)
}

// holdsResource checks that the session (as answered and as read back)
// shows its first resource's field as sent; prefix is the resource
// variant's path in the request (".resources[]<OfFile>").
func (w *managedWalker) holdsResource(prefix string) func(*testing.T, *fieldCase) {
	return func(t *testing.T, c *fieldCase) {
		out := ok(t, c)
		if out == nil {
			return
		}
		_, got := w.do(t, "GET", "/v1/sessions/"+out["id"].(string), nil)
		field := strings.TrimPrefix(c.leaf.path, prefix)
		for _, o := range []map[string]any{out, got} {
			holds(t, c, "resources[0]"+field, jsonAt(o, ".resources[0]"+field), c.value)
		}
	}
}

// outcomeHolds checks a user.define_outcome case: the stored event holds
// the field's value, and the session ran the outcome to an end.
func (w *managedWalker) outcomeHolds(t *testing.T, c *fieldCase, sessionID string) {
	t.Helper()
	evs := w.waitIdle(t, sessionID, 0)
	field := c.leaf.path[strings.Index(c.leaf.path, "<OfUserDefineOutcome>")+len("<OfUserDefineOutcome>"):]
	field = strings.ReplaceAll(field, "<OfText>", "")
	for _, e := range evs {
		if e["type"] == "user.define_outcome" {
			holds(t, c, "the stored user.define_outcome", jsonAt(e, field), c.value)
			if field == ".description" {
				w.requestWith(t, c.marker)
			}
			return
		}
	}
	t.Errorf("%s: no user.define_outcome stored: %v", c.leaf.path, evs)
}
