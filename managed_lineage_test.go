package agentkernel_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// lastTextAndSteps is the request's last user text and how many model
// steps the turn it started has taken since.
func lastTextAndSteps(r anthropictest.Request) (string, int) {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role != "user" {
			continue
		}
		for _, b := range r.Blocks(i) {
			if b.Type == "text" && b.Text != "" {
				steps := 0
				for _, m := range r.Messages[i+1:] {
					if m.Role == "assistant" {
						steps++
					}
				}
				return b.Text, steps
			}
		}
	}
	return "", 0
}

func bash(cmd string) anthropictest.Turn {
	return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": cmd}}}}
}

// lineageModel: "build" writes a.txt, then writes b.txt and removes a.txt;
// "look" shows the workspace; "hang" hangs until interrupted.
func lineageModel(r anthropictest.Request) anthropictest.Turn {
	text, steps := lastTextAndSteps(r)
	switch {
	case text == "build" && steps == 0:
		return bash("echo one > a.txt")
	case text == "build" && steps == 1:
		return bash("echo two > b.txt && rm a.txt")
	case text == "look" && steps == 0:
		return bash("ls -1 /workspace; cat /workspace/a.txt 2>/dev/null || echo no-a")
	case text == "hang":
		return anthropictest.Turn{Text: "thinking", Hang: true}
	}
	return anthropictest.Turn{Text: "done " + text}
}

type lineageEnv struct {
	t   testing.TB
	d   *daemontest.Daemon
	c   anthropic.Client
	key string
	ag  string
	env string
}

func newLineageEnv(t *testing.T) *lineageEnv {
	fake := anthropictest.New(t, lineageModel)
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	})
	return lineageOn(t, d)
}

// lineageOn is a lineageEnv on a running daemon whose claude-* models are
// a fake: an agent with the toolset and an environment.
func lineageOn(t testing.TB, d *daemontest.Daemon) *lineageEnv {
	c := sdkClient(d, d.AdminKey)
	ag, err := c.Beta.Agents.New(context.Background(), anthropic.BetaAgentNewParams{Name: "lineage",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}}})
	if err != nil {
		t.Fatal(err)
	}
	return &lineageEnv{t: t, d: d, c: c, key: d.AdminKey, ag: ag.ID, env: newEnv(t, c, "lineage").ID}
}

func (e *lineageEnv) session() string {
	return newSession(e.t, e.c, e.ag, e.env).ID
}

func (e *lineageEnv) events(sid string) []anthropic.BetaManagedAgentsSessionEventUnion {
	e.t.Helper()
	var out []anthropic.BetaManagedAgentsSessionEventUnion
	it := e.c.Beta.Sessions.Events.ListAutoPaging(context.Background(), sid, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(500)})
	for it.Next() {
		out = append(out, it.Current())
	}
	if err := it.Err(); err != nil {
		e.t.Fatal(err)
	}
	return out
}

// say sends text and waits until the session is idle again; it returns the
// text of the turn's last tool result.
func (e *lineageEnv) say(sid, text string) string {
	e.t.Helper()
	idles := count(e.events(sid), "session.status_idle")
	if _, err := e.c.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText(text)}}); err != nil {
		e.t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		evs := e.events(sid)
		if count(evs, "session.status_idle") > idles {
			var last string
			for _, ev := range evs {
				if ev.Type == "agent.tool_result" {
					var body struct {
						Content []struct{ Text string } `json:"content"`
					}
					_ = json.Unmarshal([]byte(ev.RawJSON()), &body)
					last = ""
					for _, b := range body.Content {
						last += b.Text
					}
				}
			}
			return strings.TrimSpace(last)
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("session %s: turn %q never ended: %v", sid, text, typesOf(evs))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func count(evs []anthropic.BetaManagedAgentsSessionEventUnion, typ string) int {
	n := 0
	for _, ev := range evs {
		if ev.Type == typ {
			n++
		}
	}
	return n
}

func typesOf(evs []anthropic.BetaManagedAgentsSessionEventUnion) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

func (e *lineageEnv) post(path, body string) (int, map[string]any) {
	e.t.Helper()
	return call(e.t.(*testing.T), "POST", e.d.URL+path, e.key, body, "content-type", "application/json")
}

// TestForkAndRewindWithTheirWorkspaces: a fork at a tool_result has the
// transcript up to it and exactly the files of that point, while the
// original goes on unaffected; a rewind to it keeps what it cut off as an
// abandoned branch (listable, read-only) and the next turn runs on the
// workspace of that point.
func TestForkAndRewindWithTheirWorkspaces(t *testing.T) {
	e := newLineageEnv(t)
	sid := e.session()
	e.say(sid, "build")
	before := e.events(sid)
	var results []anthropic.BetaManagedAgentsSessionEventUnion
	for _, ev := range before {
		if ev.Type == "agent.tool_result" {
			results = append(results, ev)
		}
	}
	if len(results) != 2 {
		t.Fatalf("build turn: %v", typesOf(before))
	}
	r1 := results[0]

	code, fork := e.post("/v1/sessions/"+sid+"/fork", fmt.Sprintf(`{"event_id":%q}`, r1.ID))
	if code != 200 {
		t.Fatalf("fork: %d %v", code, fork)
	}
	fid, _ := fork["id"].(string)
	lin, _ := fork["lineage"].(map[string]any)
	if fid == "" || fid == sid || lin == nil || lin["forked_from"].(map[string]any)["session_id"] != sid || fork["status"] != "idle" {
		t.Fatalf("fork response %v", fork)
	}
	fevs := e.events(fid)
	at := 0
	for i, ev := range before {
		if ev.ID == r1.ID {
			at = i + 1
		}
	}
	if len(fevs) < at+1 || fevs[at-1].ID != r1.ID || fevs[len(fevs)-1].Type != "session.status_idle" {
		t.Fatalf("fork events %v, want the source's %d up to %s and a closing status_idle", typesOf(fevs), at, r1.ID)
	}
	for i := range at {
		if fevs[i].ID != before[i].ID {
			t.Fatalf("fork event %d is %s, the source's is %s", i, fevs[i].ID, before[i].ID)
		}
	}
	if got := e.say(fid, "look"); got != "a.txt\none" {
		t.Fatalf("the fork's workspace: %q, want a.txt alone, holding \"one\"", got)
	}
	if got := e.say(sid, "look"); got != "b.txt\nno-a" {
		t.Fatalf("the original's workspace after the fork: %q, want b.txt alone", got)
	}

	// Rewind the original to the same point.
	before = e.events(sid)
	code, rw := e.post("/v1/sessions/"+sid+"/rewind", fmt.Sprintf(`{"event_id":%q}`, r1.ID))
	if code != 200 {
		t.Fatalf("rewind: %d %v", code, rw)
	}
	branch := rw["branch"].(map[string]any)
	bid := branch["id"].(string)
	if rw["session"].(map[string]any)["id"] != sid || branch["lineage"].(map[string]any)["branch_of"].(map[string]any)["session_id"] != sid {
		t.Fatalf("rewind response %v", rw)
	}
	after := e.events(sid)
	if len(after) != at+1 || after[at-1].ID != r1.ID || after[at].Type != "session.status_idle" {
		t.Fatalf("events after the rewind %v", typesOf(after))
	}
	if got := e.say(sid, "look"); got != "a.txt\none" {
		t.Fatalf("the rewound session's workspace: %q, want a.txt alone, holding \"one\"", got)
	}
	code, list := call(t, "GET", e.d.URL+"/v1/sessions/"+sid+"/branches", e.key, "")
	data, _ := list["data"].([]any)
	if code != 200 || len(data) != 1 || data[0].(map[string]any)["id"] != bid {
		t.Fatalf("branches: %d %v", code, list)
	}
	bevs := e.events(bid)
	if len(bevs) != len(before) {
		t.Fatalf("the branch has %d events, the session had %d before the rewind", len(bevs), len(before))
	}
	for i := range bevs {
		if bevs[i].ID != before[i].ID {
			t.Fatalf("branch event %d is %s, was %s", i, bevs[i].ID, before[i].ID)
		}
	}
	_, err := e.c.Beta.Sessions.Events.Send(context.Background(), bid, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("hello")}})
	wantStatus(t, "send to an abandoned branch", err, 409, "branch")
	// A second rewind, to the first message, keeps both branches and asks
	// the agent that message again.
	first := e.events(sid)[0].ID
	if code, rw := e.post("/v1/sessions/"+sid+"/rewind", fmt.Sprintf(`{"event_id":%q}`, first)); code != 200 {
		t.Fatalf("second rewind: %d %v", code, rw)
	}
	deadline := time.Now().Add(60 * time.Second)
	for evs := e.events(sid); count(evs, "session.status_idle") == 0 || evs[len(evs)-1].Type != "session.status_idle"; evs = e.events(sid) {
		if time.Now().After(deadline) {
			t.Fatalf("the first message was not answered again after the rewind: %v", typesOf(evs))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := e.events(sid); count(got, "agent.tool_result") != 2 {
		t.Fatalf("after a rewind to the first message: %v, want its turn run again", typesOf(got))
	}
	_, list = call(t, "GET", e.d.URL+"/v1/sessions/"+sid+"/branches", e.key, "")
	if data, _ := list["data"].([]any); len(data) != 2 {
		t.Fatalf("branches after a second rewind: %v", list)
	}
	code, h := call(t, "GET", e.d.URL+"/v1/sessions/"+sid+"/history", e.key, "")
	turns, _ := h["turns"].([]any)
	hb, _ := h["branches"].([]any)
	if code != 200 || len(turns) != 1 || len(hb) != 2 {
		t.Fatalf("history: %d %v; want the one turn run again and two branches", code, h)
	}
	// The session list shows sessions, not branches.
	it := e.c.Beta.Sessions.ListAutoPaging(context.Background(), anthropic.BetaSessionListParams{})
	for it.Next() {
		if it.Current().ID == bid {
			t.Fatal("an abandoned branch is listed with the sessions")
		}
	}
}

// TestLineageBadRequests: unknown events and sessions, another tenant's
// session, a running session, malformed bodies.
func TestLineageBadRequests(t *testing.T) {
	e := newLineageEnv(t)
	sid := e.session()
	e.say(sid, "plain")
	evs := e.events(sid)
	last := evs[len(evs)-1].ID
	for _, c := range []struct {
		path, body string
		status     int
		mention    string
	}{
		{"/v1/sessions/" + sid + "/fork", `{"event_id":"sevt_nope"}`, 404, "sevt_nope"},
		{"/v1/sessions/sesn_nope/fork", `{}`, 404, "sesn_nope"},
		{"/v1/sessions/" + sid + "/rewind", `{}`, 400, "event_id"},
		{"/v1/sessions/" + sid + "/rewind", fmt.Sprintf(`{"event_id":%q}`, last), 400, "nothing to rewind"},
		{"/v1/sessions/" + sid + "/rewind", `{"event_id":"sevt_nope"}`, 404, "sevt_nope"},
		{"/v1/sessions/" + sid + "/fork", `{"event_id":1}`, 400, "event_id"},
		{"/v1/sessions/" + sid + "/fork", `{"event_id":"x","colour":1}`, 400, "colour"},
		{"/v1/sessions/" + sid + "/fork", `{"event_id":`, 400, ""},
	} {
		code, body := e.post(c.path, c.body)
		if _, msg := errType(body); code != c.status || !strings.Contains(msg, c.mention) {
			t.Fatalf("POST %s %s: %d %v, want %d mentioning %q", c.path, c.body, code, body, c.status, c.mention)
		}
	}
	other := tenantKey(t, e.d, "other")
	for _, p := range []string{"/fork", "/rewind"} {
		code, _ := call(t, "POST", e.d.URL+"/v1/sessions/"+sid+p, other, fmt.Sprintf(`{"event_id":%q}`, evs[0].ID), "content-type", "application/json")
		if code != 404 {
			t.Fatalf("another tenant's %s: %d, want 404", p, code)
		}
	}
	if code, _ := call(t, "GET", e.d.URL+"/v1/sessions/"+sid+"/branches", other, ""); code != 404 {
		t.Fatalf("another tenant's branches: %d", code)
	}
	// A running session is not rewound.
	if _, err := e.c.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("hang")}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		s, err := e.c.Beta.Sessions.Get(context.Background(), sid, anthropic.BetaSessionGetParams{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Status == "running" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the hanging turn never ran")
		}
		time.Sleep(20 * time.Millisecond)
	}
	code, body := e.post("/v1/sessions/"+sid+"/rewind", fmt.Sprintf(`{"event_id":%q}`, evs[0].ID))
	if _, msg := errType(body); code != 409 || !strings.Contains(msg, "interrupt") {
		t.Fatalf("rewind of a running session: %d %v", code, body)
	}
}
