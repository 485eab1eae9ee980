package crashtest

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/session"
)

func interrupt(t testing.TB, c anthropic.Client, sid string) {
	t.Helper()
	_, err := c.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{
			Type: anthropic.BetaManagedAgentsUserInterruptEventParamsTypeUserInterrupt}}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInterruptSentBeforeACrash: the user interrupts a turn whose process
// is stuck (between the model's tool_use and the tool's run) and the daemon
// dies before the turn saw it. The interrupt is durable (the session's
// interrupt flag, set with the event): the recovered turn ends interrupted
// instead of going on — the tool never runs and the model is not asked
// again.
func TestInterruptSentBeforeACrash(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		var calls atomic.Int64
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			calls.Add(1)
			if hasToolResult(r) {
				return anthropictest.Turn{Text: "Done."}
			}
			return anthropictest.Turn{Text: "Writing.", ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo ran >> /workspace/log"}}}}
		})
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newSession(t, c)
		n.arm(session.FailBeforeToolExec)
		send(t, c, sid, "go")
		n.waitReached(session.FailBeforeToolExec)
		interrupt(t, c, sid)
		n.kill()
		n.disarm(session.FailBeforeToolExec)
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		checkTrajectory(t, evs)
		if len(ofType(evs, "session.status_rescheduled")) != 1 || len(ofType(evs, "user.interrupt")) != 1 {
			t.Fatalf("trajectory %v", types(evs))
		}
		results := ofType(evs, "agent.tool_result")
		if len(results) != 1 || strings.Contains(results[0].Raw, `"is_error":false`) {
			t.Fatalf("tool results %v: want the one bash call closed as not run", results)
		}
		if got := calls.Load(); got != 1 {
			t.Fatalf("the model was asked %d times; an interrupted turn must not ask it again", got)
		}
		if msgs := ofType(evs, "agent.message"); len(msgs) != 1 {
			t.Fatalf("agent messages %v: want only the one before the interrupt", types(evs))
		}
	})
}
