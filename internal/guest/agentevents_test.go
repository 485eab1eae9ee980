package guest

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestAgentEventsRelayInOrderWithAck(t *testing.T) {
	c, work := startGuest(t, nil)
	ctx := context.Background()
	for i, ev := range []AgentEvent{
		{Type: "agent.started"},
		{Type: "agent.heartbeat", Status: "running"},
		{Type: "agent.tool_use", Data: json.RawMessage(`{"tool":"bash"}`)},
	} {
		seq, err := c.PostAgentEvents(ctx, []AgentEvent{ev})
		if err != nil || seq != int64(i+1) {
			t.Fatalf("post %d: seq %d, err %v", i, seq, err)
		}
	}
	got, err := c.PullAgentEvents(ctx, 0, 0)
	if err != nil || len(got) != 3 {
		t.Fatalf("pull: %v %v", got, err)
	}
	for i, ev := range got {
		if ev.Seq != int64(i+1) || ev.At.IsZero() {
			t.Fatalf("event %d: %+v", i, ev)
		}
	}
	if got[1].Status != "running" || string(got[2].Data) != `{"tool":"bash"}` {
		t.Fatalf("fields lost: %+v", got)
	}
	// Acknowledge two; the third is delivered again until acknowledged.
	if got, _ = c.PullAgentEvents(ctx, 2, 0); len(got) != 1 || got[0].Seq != 3 {
		t.Fatalf("after ack 2: %+v", got)
	}
	// A restarted guest (a new log on the same workspace) keeps the
	// unacknowledged event and continues the numbering.
	l := newAgentEventLog(filepath.Join(work, runtimeDirName), time.Now)
	if l.loadErr != nil || len(l.events) != 1 || l.events[0].Seq != 3 || l.lastSeq != 3 {
		t.Fatalf("reload: %+v err %v", l.events, l.loadErr)
	}
	// Long-poll: an append wakes a waiting pull.
	done := make(chan []AgentEvent, 1)
	go func() {
		evs, _ := c.PullAgentEvents(ctx, 3, 10*time.Second)
		done <- evs
	}()
	time.Sleep(50 * time.Millisecond)
	if _, err := c.PostAgentEvents(ctx, []AgentEvent{{Type: "agent.completed"}}); err != nil {
		t.Fatal(err)
	}
	if evs := <-done; len(evs) != 1 || evs[0].Type != "agent.completed" || evs[0].Seq != 4 {
		t.Fatalf("long poll got %+v", evs)
	}
}

func TestAgentEventsRejectBadEvents(t *testing.T) {
	c, _ := startGuest(t, nil)
	ctx := context.Background()
	cases := []struct {
		ev   AgentEvent
		want string
	}{
		{AgentEvent{Type: "agent.dancing"}, `type "agent.dancing" is not an agent event type`},
		{AgentEvent{Type: "agent.heartbeat"}, "needs status idle, running, degraded or failed"},
		{AgentEvent{Type: "agent.heartbeat", Status: "sleepy"}, `status "sleepy"`},
		{AgentEvent{Type: "agent.tool_use", Status: "running"}, "status is only for agent.heartbeat"},
		{AgentEvent{Type: "agent.tool_use", Data: json.RawMessage(`"` + strings.Repeat("x", MaxAgentEventData) + `"`)}, "the limit is 65536"},
	}
	for _, tc := range cases {
		_, err := c.PostAgentEvents(ctx, []AgentEvent{tc.ev})
		var ge *Error
		if !errors.As(err, &ge) || ge.Status != 400 || !strings.Contains(ge.Message, tc.want) {
			t.Errorf("%+v: got %v, want 400 containing %q", tc.ev.Type, err, tc.want)
		}
	}
	if got, _ := c.PullAgentEvents(ctx, 0, 0); len(got) != 0 {
		t.Fatalf("bad events were buffered: %+v", got)
	}
}

func TestAgentCLIPostsToTheGuest(t *testing.T) {
	c, work := startGuest(t, nil)
	t.Setenv(AgentSocketEnv, filepath.Join(filepath.Dir(work), "agent.sock"))
	var errb strings.Builder
	if code := AgentMain(context.Background(), []string{"heartbeat", "running"}, &errb); code != 0 {
		t.Fatalf("heartbeat: exit %d: %s", code, errb.String())
	}
	if code := AgentMain(context.Background(), []string{"event", "agent.file_edited", "--data", `{"path":"a.go"}`}, &errb); code != 0 {
		t.Fatalf("event: exit %d: %s", code, errb.String())
	}
	if code := AgentMain(context.Background(), []string{"event", "agent.bogus"}, &errb); code != 2 || !strings.Contains(errb.String(), "not an agent event type") {
		t.Fatalf("bogus event: exit %d: %s", code, errb.String())
	}
	got, _ := c.PullAgentEvents(context.Background(), 0, 0)
	if len(got) != 2 || got[0].Status != "running" || got[1].Type != "agent.file_edited" {
		t.Fatalf("got %+v", got)
	}
}
