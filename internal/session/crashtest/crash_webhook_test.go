package crashtest

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/session"
)

// hookServer is the test's webhook receiver: it fails its first `fail`
// requests, can go down (its port closed) and come back on the same
// port, and keeps every request it accepted.
type hookServer struct {
	t    *testing.T
	addr string
	srv  *http.Server

	mu     sync.Mutex
	fail   int
	bodies [][]byte
	heads  []http.Header
	seen   chan struct{}
}

func newHookServer(t *testing.T, fail int) *hookServer {
	h := &hookServer{t: t, fail: fail, seen: make(chan struct{}, 4096)}
	h.up("127.0.0.1:0")
	t.Cleanup(h.down)
	return h
}

func (h *hookServer) up(addr string) {
	h.t.Helper()
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		h.t.Fatal(err)
	}
	h.addr = ln.Addr().String()
	h.srv = &http.Server{Handler: http.HandlerFunc(h.serve)}
	go func() { _ = h.srv.Serve(ln) }()
}

func (h *hookServer) down() {
	if h.srv != nil {
		_ = h.srv.Close()
		h.srv = nil
	}
}

func (h *hookServer) serve(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.fail > 0 {
		h.fail--
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	h.bodies, h.heads = append(h.bodies, b), append(h.heads, r.Header.Clone())
	select {
	case h.seen <- struct{}{}:
	default:
	}
}

// unwrapped returns every accepted delivery unwrapped by the official
// SDK (each must verify), keyed in arrival order.
func (h *hookServer) unwrapped(secret string) []*anthropic.UnwrapWebhookEvent {
	h.t.Helper()
	c := anthropic.NewClient(option.WithWebhookKey(secret), option.WithAPIKey("unused"))
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]*anthropic.UnwrapWebhookEvent, len(h.bodies))
	for i, b := range h.bodies {
		ev, err := c.Beta.Webhooks.Unwrap(b, h.heads[i])
		if err != nil {
			h.t.Fatalf("delivery %d does not verify: %v\n%s", i, err, b)
		}
		if ev.ID != h.heads[i].Get("webhook-id") {
			h.t.Fatalf("delivery %d: event id %s, webhook-id %s", i, ev.ID, h.heads[i].Get("webhook-id"))
		}
		out[i] = ev
	}
	return out
}

// webhookOf maps the session events that have webhooks.
var webhookOf = map[string]string{
	"session.status_running": "session.status_run_started", "session.status_idle": "session.status_idled",
	"session.status_rescheduled": "session.status_rescheduled", "session.status_terminated": "session.status_terminated",
}

// TestWebhooksSurviveAKill: a receiver that fails its first deliveries
// and is down while the daemon is SIGKILLed — with deliveries pending and
// a turn stuck mid-tool — receives, after the restart, every event the
// sessions produced (the rescheduling the crash caused included), in
// order per session, each verified by the SDK's Unwrap.
func TestWebhooksSurviveAKill(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		ctx := context.Background()
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			if lastUserText(r) == "tool" && !hasToolResult(r) {
				return anthropictest.Turn{Text: "Running.", ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "true"}}}}
			}
			return anthropictest.Turn{Text: "ok"}
		})
		n := newNode(t, engine, fake.URL, "[webhooks]\nallow_loopback = true\nbackoff_base = \"20ms\"\nbackoff_max = \"200ms\"\npoll_interval = \"20ms\"\nmax_attempts = 100\n")
		n.start()
		rcv := newHookServer(t, 3)
		ak := agentkernel.New(agentkernel.WithBaseURL(n.url()), agentkernel.WithAPIKey(n.key))
		hook, err := ak.Webhooks.Create(ctx, agentkernel.WebhookCreateParams{URL: "http://" + rcv.addr + "/hook", EventTypes: []string{
			"session.created", "session.status_run_started", "session.status_idled", "session.status_rescheduled"}})
		if err != nil {
			t.Fatal(err)
		}
		c := n.client()
		sids := []string{newSession(t, c), newSession(t, c), newSession(t, c)}
		for _, sid := range sids {
			send(t, c, sid, "hi")
		}
		for _, sid := range sids {
			waitIdle(t, n, c, sid, 1)
		}

		// The receiver goes down; more events pile up, and one turn hangs
		// mid-tool when the daemon is killed.
		rcv.down()
		n.arm(session.FailBeforeToolExec)
		send(t, c, sids[0], "tool")
		n.waitReached(session.FailBeforeToolExec)
		for _, sid := range sids[1:] {
			send(t, c, sid, "again")
			waitIdle(t, n, c, sid, 2)
		}
		pending, err := ak.Webhooks.Deliveries(ctx, hook.ID, agentkernel.WebhookDeliveriesParams{Status: "pending"})
		if err != nil || len(pending) == 0 {
			t.Fatalf("pending deliveries before the kill: %d, %v", len(pending), err)
		}
		n.kill()
		n.disarm(session.FailBeforeToolExec)
		n.start()
		c = n.client()
		rcv.up(rcv.addr)
		waitIdle(t, n, c, sids[0], 2)

		want := map[string][]string{}
		total := 0
		for _, sid := range sids {
			want[sid] = []string{"session.created"}
			for _, ev := range events(t, c, sid) {
				if w := webhookOf[ev.Type]; w != "" {
					want[sid] = append(want[sid], w)
				}
			}
			total += len(want[sid])
		}
		if !strings.Contains(strings.Join(want[sids[0]], " "), "session.status_rescheduled") {
			t.Fatalf("the crash left no rescheduling to deliver: %v", want[sids[0]])
		}
		// At least once: duplicates (same webhook-id) are the receiver's to
		// drop; each event must arrive, in its session's order.
		var got map[string][]string
		deadline := time.Now().Add(120 * time.Second)
		for {
			got = map[string][]string{}
			seen := map[string]bool{}
			n := 0
			evs := rcv.unwrapped(hook.Secret)
			for _, ev := range evs {
				if seen[ev.ID] {
					continue
				}
				seen[ev.ID] = true
				got[ev.Data.ID] = append(got[ev.Data.ID], ev.Data.Type)
				n++
			}
			if n >= total {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("received %d distinct events, want %d", n, total)
			}
			select {
			case <-rcv.seen:
			case <-time.After(time.Second):
			}
		}
		for _, sid := range sids {
			if strings.Join(got[sid], " ") != strings.Join(want[sid], " ") {
				t.Fatalf("session %s: received %v, want %v", sid, got[sid], want[sid])
			}
		}

		// A tampered body fails verification.
		rcv.mu.Lock()
		body, head := append([]byte(nil), rcv.bodies[0]...), rcv.heads[0]
		rcv.mu.Unlock()
		tampered := []byte(strings.Replace(string(body), `"session.`, `"sessiom.`, 1))
		verify := anthropic.NewClient(option.WithWebhookKey(hook.Secret), option.WithAPIKey("unused"))
		if _, err := verify.Beta.Webhooks.Unwrap(tampered, head); err == nil {
			t.Fatal("Unwrap verified a tampered body")
		}
	})
}
