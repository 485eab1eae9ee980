package agentkernel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

func TestManagedEventsSendListAndStream(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)
	s := newSession(t, c, newAgent(t, c, "a").ID, newEnv(t, c, "e").ID)

	// The stream is open before the message is sent and still delivers it.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}

	sent, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("hello"), userText("again")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Data) != 2 || sent.Data[0].Type != "user.message" || sent.Data[0].ID == "" || sent.Data[0].AsUserMessage().Content[0].Text != "hello" {
		t.Fatalf("send: %s", sent.RawJSON())
	}
	// The two messages were appended together, so they come first and
	// adjacent; the runtime's own events (it answers them) follow.
	for i, want := range sent.Data {
		if !stream.Next() {
			t.Fatalf("stream ended before event %d: %v", i, stream.Err())
		}
		ev := stream.Current()
		if ev.ID != want.ID || ev.Type != "user.message" || ev.AsUserMessage().Content[0].Text != want.AsUserMessage().Content[0].Text {
			t.Fatalf("streamed event %d: %s, want id %s", i, ev.RawJSON(), want.ID)
		}
	}

	// List shows the same events; one per page, in order.
	userOnly := []anthropic.BetaManagedAgentsSessionEventType{"user.message"}
	var listed []string
	for ev := range c.Beta.Sessions.Events.ListAutoPaging(ctx, s.ID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1), Types: userOnly}).All() {
		listed = append(listed, ev.ID)
		if ev.Type != "user.message" || ev.ProcessedAt.IsZero() {
			t.Fatalf("listed event: %s", ev.RawJSON())
		}
	}
	if len(listed) != 2 || listed[0] != sent.Data[0].ID || listed[1] != sent.Data[1].ID {
		t.Fatalf("listed %v, want %s, %s", listed, sent.Data[0].ID, sent.Data[1].ID)
	}
	all, err := c.Beta.Sessions.Events.List(ctx, s.ID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	if err != nil || len(all.Data) < 2 || all.Data[0].ID != sent.Data[0].ID {
		t.Fatalf("list all: %v %v", all, err)
	}
	desc, err := c.Beta.Sessions.Events.List(ctx, s.ID, anthropic.BetaSessionEventListParams{Order: anthropic.BetaSessionEventListParamsOrderDesc, Limit: anthropic.Int(1000)})
	if err != nil || len(desc.Data) < len(all.Data) || desc.Data[len(desc.Data)-1].ID != sent.Data[0].ID {
		t.Fatalf("newest first: %v %v", desc, err)
	}
	filtered, err := c.Beta.Sessions.Events.List(ctx, s.ID, anthropic.BetaSessionEventListParams{Types: []anthropic.BetaManagedAgentsSessionEventType{"user.interrupt"}})
	if err != nil || len(filtered.Data) != 0 {
		t.Fatalf("type filter: %v %v", filtered, err)
	}

	// An interrupt is accepted and streamed too.
	if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{
		{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{Type: anthropic.BetaManagedAgentsUserInterruptEventParamsTypeUserInterrupt}},
	}}); err != nil {
		t.Fatal(err)
	}
	for stream.Current().Type != "user.interrupt" {
		if !stream.Next() {
			t.Fatalf("interrupt not streamed: %v", stream.Err())
		}
	}
}

// sse is a raw SSE reader (the SDK does not send Last-Event-ID).
type sse struct {
	resp *http.Response
	sc   *bufio.Scanner
}

func openSSE(t *testing.T, ctx context.Context, d *daemontest.Daemon, key, sessionID, lastID string) *sse {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", d.URL+"/v1/sessions/"+sessionID+"/events/stream", nil)
	req.Header.Set("x-api-key", key)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		resp.Body.Close()
		t.Fatalf("stream: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	return &sse{resp: resp, sc: bufio.NewScanner(resp.Body)}
}

// next returns the next event's SSE type, id and data.
func (s *sse) next(t *testing.T) (typ, id string, data map[string]any) {
	t.Helper()
	for s.sc.Scan() {
		line := s.sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			typ = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "id: "):
			id = strings.TrimPrefix(line, "id: ")
		case strings.HasPrefix(line, "data: "):
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &data); err != nil {
				t.Fatal(err)
			}
		case line == "" && typ != "":
			if typ == "ping" {
				typ, id, data = "", "", nil
				continue
			}
			return typ, id, data
		}
	}
	t.Fatalf("stream ended: %v", s.sc.Err())
	return
}

func TestManagedStreamResumesFromLastEventID(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)
	s := newSession(t, c, newAgent(t, c, "a").ID, newEnv(t, c, "e").ID)
	var ids []string
	send := func(n int) {
		for range n {
			r, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{
				Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText(fmt.Sprintf("m%d", len(ids)))}})
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, r.Data[0].ID)
		}
	}
	// read checks the stream delivers exactly ids[from:to] among its
	// user messages, in order, and no event twice (the runtime's events
	// for each message come in between).
	seen := map[string]bool{}
	read := func(st *sse, from, to int) {
		t.Helper()
		for i := from; i < to; {
			typ, id, data := st.next(t)
			if seen[id] || data["id"] != id {
				t.Fatalf("event %s %s delivered twice or with a mismatched id (%v)", typ, id, data)
			}
			seen[id] = true
			if typ != "user.message" {
				continue
			}
			if id != ids[i] {
				t.Fatalf("message %d: got %s, want %s (gap or reordering)", i, id, ids[i])
			}
			i++
		}
	}
	send(3)
	st := openSSE(t, ctx, d, d.AdminKey, s.ID, ids[0])
	read(st, 1, 3)
	send(2)
	read(st, 3, 5)
	st.resp.Body.Close()

	send(3) // while disconnected
	st = openSSE(t, ctx, d, d.AdminKey, s.ID, ids[4])
	read(st, 5, 8)
	send(1)
	read(st, 8, 9)
	st.resp.Body.Close()

	// Two subscribers at once see the same next event.
	a, b := openSSE(t, ctx, d, d.AdminKey, s.ID, ids[8]), openSSE(t, ctx, d, d.AdminKey, s.ID, "")
	defer a.resp.Body.Close()
	defer b.resp.Body.Close()
	send(1)
	read(a, 9, 10)
	seen = map[string]bool{}
	read(b, 9, 10)

	code, body := call(t, "GET", d.URL+"/v1/sessions/"+s.ID+"/events/stream", d.AdminKey, "", "Last-Event-ID", "sevt_nope")
	if typ, msg := errType(body); code != 400 || typ != "invalid_request_error" || !strings.Contains(msg, "Last-Event-ID") {
		t.Fatalf("unknown Last-Event-ID: %d %v", code, body)
	}
}

func TestManagedEventsRejectBadInput(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)
	s := newSession(t, c, newAgent(t, c, "a").ID, newEnv(t, c, "e").ID)
	u := d.URL + "/v1/sessions/" + s.ID + "/events"

	for _, tc := range []struct {
		name, body string
		status     int
		mentions   string
	}{
		{"malformed JSON", `{"events": [`, 400, "malformed JSON"},
		{"no events", `{"events": []}`, 400, `"events"`},
		{"message without content", `{"events": [{"type": "user.message"}]}`, 400, `events[0].content`},
		{"text block without text", `{"events": [{"type": "user.message", "content": [{"type": "text"}]}]}`, 400, `events[0].content[0].text`},
		{"unknown event type", `{"events": [{"type": "user.dance"}]}`, 400, "user.dance"},
		{"event type agentkernel does not serve", `{"events": [{"type": "system.message"}]}`, 400, "system.message"},
		{"outcome without a description", `{"events": [{"type": "user.define_outcome"}]}`, 400, `events[0].description`},
		{"agent event from a client", `{"events": [{"type": "agent.message"}]}`, 400, "agent.message"},
		{"bad confirmation result", `{"events": [{"type": "user.tool_confirmation", "tool_use_id": "x", "result": "maybe"}]}`, 400, `events[0].tool_use_id`},
		{"result for no tool call", `{"events": [{"type": "user.custom_tool_result", "custom_tool_use_id": "sevt_nope"}]}`, 400, `events[0].custom_tool_use_id`},
		{"oversized message", `{"events": [{"type": "user.message", "content": [{"type": "text", "text": "` + strings.Repeat("x", 300<<10) + `"}]}]}`, 413, "limit is 262144 bytes per event"},
		{"body over the server limit", `{"events": [{"type": "user.message", "content": [{"type": "text", "text": "` + strings.Repeat("x", 2<<20) + `"}]}]}`, 413, "server.max_body_bytes"},
	} {
		code, body := call(t, "POST", u, d.AdminKey, tc.body, "Content-Type", "application/json")
		if typ, msg := errType(body); code != tc.status || typ == "" || !strings.Contains(msg, tc.mentions) {
			t.Errorf("%s: %d %q %q, want %d mentioning %q", tc.name, code, typ, msg, tc.status, tc.mentions)
		}
	}
	list, err := c.Beta.Sessions.Events.List(ctx, s.ID, anthropic.BetaSessionEventListParams{})
	if err != nil || len(list.Data) != 0 {
		t.Fatalf("rejected events were stored: %v %v", list, err)
	}

	// Another tenant's session is invisible: 404 for every call, as for an unknown id.
	other := sdkClient(d, tenantKey(t, d, "globex"))
	_, err = other.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("hi")}})
	wantStatus(t, "send to another tenant's session", err, 404, s.ID)
	_, err = other.Beta.Sessions.Get(ctx, s.ID, anthropic.BetaSessionGetParams{})
	wantStatus(t, "get another tenant's session", err, 404, s.ID)
	_, err = other.Beta.Sessions.Events.List(ctx, s.ID, anthropic.BetaSessionEventListParams{})
	wantStatus(t, "list another tenant's events", err, 404, s.ID)
	_, err = other.Beta.Sessions.Delete(ctx, s.ID, anthropic.BetaSessionDeleteParams{})
	wantStatus(t, "delete another tenant's session", err, 404, s.ID)
	_, err = other.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(s.Agent.ID)}, EnvironmentID: s.EnvironmentID})
	wantStatus(t, "session on another tenant's agent", err, 404, s.Agent.ID)

	// An archived session is read-only; a deleted one is gone.
	if _, err := c.Beta.Sessions.Archive(ctx, s.ID, anthropic.BetaSessionArchiveParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("hi")}})
	wantStatus(t, "send to an archived session", err, 409, "archived")
	if _, err := c.Beta.Sessions.Delete(ctx, s.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("hi")}})
	wantStatus(t, "send to a deleted session", err, 404, s.ID)
}

// TestManagedStreamEndsWhenTheDaemonStops: an open event stream does not
// hold up the daemon's shutdown. With a shutdown timeout of an hour, the
// daemon itself must end the stream: it ends with a clean EOF, after the
// events it already sent, and Stop returns. A daemon that left the stream
// open would make the read fail at the request's deadline, not hang.
func TestManagedStreamEndsWhenTheDaemonStops(t *testing.T) {
	d := daemontest.Start(t, func(c *config.Config) { c.Server.ShutdownTimeout = config.Duration(time.Hour) })
	c := sdkClient(d, d.AdminKey)
	s := newSession(t, c, newAgent(t, c, "a").ID, newEnv(t, c, "e").ID)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	st := openSSE(t, ctx, d, d.AdminKey, s.ID, "")
	defer st.resp.Body.Close()

	sent, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("before the shutdown")}})
	if err != nil {
		t.Fatal(err)
	}
	for {
		typ, id, data := st.next(t)
		if typ != "user.message" {
			continue
		}
		if id != sent.Data[0].ID || !strings.Contains(fmt.Sprint(data["content"]), "before the shutdown") {
			t.Fatalf("the event sent before the shutdown arrived as %s %v, want %s", id, data, sent.Data[0].ID)
		}
		break
	}

	stopped := make(chan error, 1)
	go func() { stopped <- d.Stop() }()
	for st.sc.Scan() { // what the runtime appended meanwhile
	}
	if err := st.sc.Err(); err != nil {
		t.Fatalf("the stream did not end cleanly at shutdown: %v (a deadline error means the daemon never ended it)", err)
	}
	if err := <-stopped; err != nil {
		t.Fatalf("daemon stop: %v", err)
	}
}

// TestManagedEventByID: GET /v1/sessions/{id}/events/{event_id}, agentkernel's
// own route, answers one event as the list does, and only through its own
// session: another session (even the same tenant's), another tenant or
// another environment's key gets a 404.
func TestManagedEventByID(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := sdkClient(d, d.AdminKey)
	// Self-hosted environments: their keys are environment keys.
	selfHosted := func(name string) string {
		code, body := rawCall(t, d, d.AdminKey, http.MethodPost, "/v1/environments", fmt.Sprintf(`{"name":%q,"config":{"type":"self_hosted"}}`, name))
		var env struct{ ID string }
		if err := json.Unmarshal(body, &env); code != http.StatusOK || err != nil {
			t.Fatalf("self_hosted environment: %d %s", code, body)
		}
		return env.ID
	}
	a, e := newAgent(t, c, "a"), selfHosted("e")
	s := newSession(t, c, a.ID, e)
	if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{
		{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{Type: anthropic.BetaManagedAgentsUserInterruptEventParamsTypeUserInterrupt}},
	}}); err != nil {
		t.Fatal(err)
	}
	list, err := c.Beta.Sessions.Events.List(ctx, s.ID, anthropic.BetaSessionEventListParams{})
	if err != nil || len(list.Data) == 0 {
		t.Fatalf("list: %v %v", list, err)
	}
	ev := list.Data[0]
	path := "/v1/sessions/" + s.ID + "/events/" + ev.ID
	code, body := rawCall(t, d, d.AdminKey, http.MethodGet, path, "")
	var got map[string]any
	if err := json.Unmarshal(body, &got); code != http.StatusOK || err != nil || got["id"] != ev.ID || got["type"] != "user.interrupt" || got["processed_at"] == nil {
		t.Fatalf("GET %s: %d %s", path, code, body)
	}
	if code, body := rawCall(t, d, d.AdminKey, http.MethodGet, path+"?limit=1", ""); code != http.StatusBadRequest {
		t.Fatalf("an unknown query parameter: %d %s", code, body)
	}
	other := newSession(t, c, a.ID, e)
	for name, tc := range map[string]struct{ key, path string }{
		"another session":     {d.AdminKey, "/v1/sessions/" + other.ID + "/events/" + ev.ID},
		"an unknown event":    {d.AdminKey, "/v1/sessions/" + s.ID + "/events/sevt_nope"},
		"another tenant":      {tenantKey(t, d, "other"), path},
		"another environment": {envKey(t, d, d.AdminKey, selfHosted("e2")), path},
	} {
		if code, body := rawCall(t, d, tc.key, http.MethodGet, tc.path, ""); code != http.StatusNotFound {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}
	if code, body := rawCall(t, d, envKey(t, d, d.AdminKey, e), http.MethodGet, path, ""); code != http.StatusOK {
		t.Fatalf("the session's environment key: %d %s", code, body)
	}
}
