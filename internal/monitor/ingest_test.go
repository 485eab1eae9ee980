package monitor_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/monitor"
	"github.com/agentkernel/agentkernel/internal/store"
)

func TestIngestRejectsBadEventsNamingTheFieldOrLimit(t *testing.T) {
	e := newEnv(t)
	s := e.service(func(c *monitor.Config) { c.NoPumps = true })
	ctx := context.Background()
	future := e.clock.Now().Add(time.Minute)
	huge := json.RawMessage(`"` + strings.Repeat("x", 70_000) + `"`)
	cases := []struct {
		evs  []monitor.EventInput
		want string
	}{
		{[]monitor.EventInput{{Type: "agent.sleeping"}}, `events[0].type: "agent.sleeping" is not an agent event type`},
		{[]monitor.EventInput{{Type: "agent.heartbeat", Status: "busy"}}, `events[0].status: "busy"`},
		{[]monitor.EventInput{{Type: "agent.tool_use", Status: "running"}}, "only agent.heartbeat carries a status"},
		{[]monitor.EventInput{{Type: "agent.started"}, {Type: "agent.tool_use", At: &future}}, "events[1].at: " + future.UTC().Format(time.RFC3339Nano) + " is 1m0s in the future; the allowed clock skew is 5s"},
		{[]monitor.EventInput{{Type: "agent.tool_use", Data: huge}}, "events[0].data is 70002 bytes; the limit is 65536 (monitor.max_event_bytes)"},
		{[]monitor.EventInput{{Type: "agent.tool_use", Data: json.RawMessage(`{nope`)}}, "events[0].data is not valid JSON"},
		{nil, "a batch holds 1 to 1000 events, got 0"},
	}
	for _, tc := range cases {
		_, err := s.Ingest(ctx, "sbx_x", tc.evs)
		if !errors.Is(err, monitor.ErrBadEvent) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("got %v, want ErrBadEvent containing %q", err, tc.want)
		}
	}
	// A rejected batch writes nothing, not even its valid first event.
	if _, err := e.st.GetActivity(ctx, "sbx_x"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("activity after rejected batches: %v", err)
	}
	// Within the skew is fine, and order is kept.
	near := e.clock.Now().Add(2 * time.Second)
	evs, err := s.Ingest(ctx, "sbx_x", []monitor.EventInput{{Type: "agent.heartbeat", Status: "running"}, {Type: "agent.tool_use", At: &near}})
	if err != nil || len(evs) != 2 || evs[0].Seq != 1 || evs[1].Seq != 2 {
		t.Fatalf("ingest: %v %+v", err, evs)
	}
}
