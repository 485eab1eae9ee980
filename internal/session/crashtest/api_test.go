package crashtest

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/pagination"
)

// event is a session event as the API lists it.
type event struct {
	ID   string
	Type string
	Raw  string
}

func (e event) text() string {
	var b struct {
		Content []struct {
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal([]byte(e.Raw), &b)
	var s string
	for _, c := range b.Content {
		s += c.Text
	}
	return s
}

// newSession creates an agent with the built-in toolset, an environment
// and a session through the SDK.
func newSession(t testing.TB, c anthropic.Client) string {
	return newSessionWith(t, c)
}

func send(t testing.TB, c anthropic.Client, sid, text string) {
	t.Helper()
	_, err := c.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Type:    anthropic.BetaManagedAgentsUserMessageEventParamsTypeUserMessage,
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text, Type: anthropic.BetaManagedAgentsTextBlockTypeText}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// events lists every event of the session, oldest first.
func events(t testing.TB, c anthropic.Client, sid string) []event {
	t.Helper()
	return collectEvents(t, c.Beta.Sessions.Events.ListAutoPaging(context.Background(), sid, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(500)}))
}

// collectEvents reads every event an autopager yields.
func collectEvents(t testing.TB, it *pagination.PageCursorAutoPager[anthropic.BetaManagedAgentsSessionEventUnion]) []event {
	t.Helper()
	var out []event
	for it.Next() {
		ev := it.Current()
		out = append(out, event{ID: ev.ID, Type: ev.Type, Raw: ev.RawJSON()})
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

func ofType(evs []event, typ string) []event {
	var out []event
	for _, e := range evs {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// waitIdle waits until the session shows n status_idle events and reads
// idle, and returns its events.
func waitIdle(t testing.TB, n *node, c anthropic.Client, sid string, idles int) []event {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for {
		evs := events(t, c, sid)
		if len(ofType(evs, "session.status_idle")) >= idles {
			s, err := c.Beta.Sessions.Get(context.Background(), sid, anthropic.BetaSessionGetParams{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Status == "idle" {
				return evs
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s never reached %d idles; events: %v\n%s", sid, idles, types(evs), n.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func types(evs []event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = e.Type
	}
	return out
}

// checkTrajectory: no event twice, every tool use has exactly one result,
// every status_running is followed by a status_idle.
func checkTrajectory(t testing.TB, evs []event) {
	t.Helper()
	ids := map[string]bool{}
	results := map[string]int{}
	for _, e := range evs {
		if ids[e.ID] {
			t.Errorf("event %s listed twice", e.ID)
		}
		ids[e.ID] = true
		if e.Type == "agent.tool_result" || e.Type == "agent.mcp_tool_result" {
			var b struct {
				ToolUseID    string `json:"tool_use_id"`
				MCPToolUseID string `json:"mcp_tool_use_id"`
			}
			_ = json.Unmarshal([]byte(e.Raw), &b)
			results[b.ToolUseID+b.MCPToolUseID]++
		}
	}
	for _, e := range append(ofType(evs, "agent.tool_use"), ofType(evs, "agent.mcp_tool_use")...) {
		if results[e.ID] != 1 {
			t.Errorf("tool use %s has %d results", e.ID, results[e.ID])
		}
	}
	if len(evs) == 0 || evs[len(evs)-1].Type != "session.status_idle" {
		t.Errorf("trajectory does not end idle: %v", types(evs))
	}
}

// sseClient follows a session's event stream with raw HTTP, reconnecting
// with Last-Event-ID whenever the stream breaks, and records every event
// id it sees.
type sseClient struct {
	ids  chan string
	stop chan struct{}
	// connected is closed once the first stream is open.
	connected chan struct{}
}

func followSSE(url func() (string, string), sid string) *sseClient {
	c := &sseClient{ids: make(chan string, 10000), stop: make(chan struct{}), connected: make(chan struct{})}
	go func() {
		last := ""
		first := true
		for {
			select {
			case <-c.stop:
				return
			default:
			}
			base, key := url()
			req, _ := http.NewRequest(http.MethodGet, base+"/v1/sessions/"+sid+"/events/stream", nil)
			req.Header.Set("x-api-key", key)
			if last != "" {
				req.Header.Set("Last-Event-ID", last)
			}
			ctx, cancel := context.WithCancel(context.Background())
			go func() {
				select {
				case <-c.stop:
				case <-ctx.Done():
				}
				cancel()
			}()
			resp, err := http.DefaultClient.Do(req.WithContext(ctx))
			if err == nil && resp.StatusCode != http.StatusOK {
				resp.Body.Close()
				err = errors.New(resp.Status)
			}
			if err == nil {
				if first {
					first = false
					close(c.connected)
				}
				sc := bufio.NewScanner(resp.Body)
				sc.Buffer(make([]byte, 1<<20), 1<<20)
				for sc.Scan() {
					if id, ok := strings.CutPrefix(sc.Text(), "id: "); ok {
						last = id
						c.ids <- id
					}
				}
				resp.Body.Close()
			}
			cancel()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return c
}

// seen returns the ids received so far.
func (c *sseClient) seen() []string {
	var out []string
	for {
		select {
		case id := <-c.ids:
			out = append(out, id)
		default:
			return out
		}
	}
}

// until collects ids until it has n of them or d passed, then returns
// them with any extra that arrived.
func (c *sseClient) until(n int, d time.Duration) []string {
	var out []string
	timeout := time.After(d)
	for len(out) < n {
		select {
		case id := <-c.ids:
			out = append(out, id)
		case <-timeout:
			return out
		}
	}
	time.Sleep(200 * time.Millisecond)
	return append(out, c.seen()...)
}
