package session

import (
	"context"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/store"
)

// TestUntakenMessageIsWokenBySweep: a message stored without a wake-up (the
// daemon died between storing it and starting its turn) is answered once
// the pending-input sweep runs, and the sweep does not double-run a session
// that has nothing queued.
func TestUntakenMessageIsWokenBySweep(t *testing.T) {
	ctx := context.Background()
	e := newRTEnv(t, anthropictest.Script(turn{Text: "answered after all"}), false)
	s := e.session(t, "claude-test", `[]`)
	st := e.follow(t, s.ID)
	// Store the message the way the API does, but never call Wake.
	if _, err := e.log.Append(ctx, s.ID, []store.NewEvent{newEvent(EventUserMessage, map[string]any{"content": textContent("are you there?")})}); err != nil {
		t.Fatal(err)
	}
	n, err := e.rt.WakePending(ctx)
	if err != nil || n != 1 {
		t.Fatalf("WakePending = %d, %v; want 1 session woken", n, err)
	}
	st.untilType(EventStatusIdle)
	if st.count(EventAgentMessage) != 1 {
		t.Fatalf("events %v", st.types())
	}
	if n, err := e.rt.WakePending(ctx); err != nil || n != 0 {
		t.Fatalf("after the turn WakePending = %d, %v; want nothing pending", n, err)
	}
	if got := len(e.fake.Requests()); got != 1 {
		t.Fatalf("%d model requests, want 1", got)
	}
}
