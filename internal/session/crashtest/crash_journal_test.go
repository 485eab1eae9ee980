package crashtest

import (
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/session"
)

// TestCrashAroundToolEventWrites: the daemon dies right after the write
// that stores a bash call's agent.tool_use with its op_started (the guest
// not yet asked), or right after the one that stores its agent.tool_result
// with its op_completed (the next model request not yet made). Either
// write is one transaction, so recovery finds the call and its op
// together: it asks the guest about the started op (never accepted: run
// it) or replays the completed one. The line is in the log exactly once,
// and the call has one tool use and one result.
func TestCrashAroundToolEventWrites(t *testing.T) {
	for _, fp := range []string{session.FailAfterToolUse, session.FailAfterToolResult} {
		t.Run(fp, func(t *testing.T) {
			engines(t, func(t *testing.T, engine string) {
				fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
					switch {
					case hasToolResult(r) && lastUserText(r) == "":
						return anthropictest.Turn{Text: "Done."}
					case lastUserText(r) == "count":
						return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "cat /workspace/log"}}}}
					}
					return anthropictest.Turn{Text: "Appending.", ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo x >> /workspace/log"}}}}
				})
				n := newNode(t, engine, fake.URL)
				n.start()
				c := n.client()
				sid := newSession(t, c)
				n.arm(fp)
				send(t, c, sid, "append")
				n.waitReached(fp)
				n.kill()
				n.disarm(fp)
				n.start()
				c = n.client()
				evs := waitIdle(t, n, c, sid, 1)
				checkTrajectory(t, evs)
				if len(ofType(evs, "session.status_rescheduled")) != 1 || len(ofType(evs, "agent.tool_use")) != 1 ||
					len(ofType(evs, "agent.tool_result")) != 1 {
					t.Fatalf("trajectory %v", types(evs))
				}
				// The model heard the call's result and answered it.
				if msgs := ofType(evs, "agent.message"); len(msgs) != 2 || msgs[1].text() != "Done." {
					t.Fatalf("agent messages %v: want the model's answer to the result after recovery", msgs)
				}
				send(t, c, sid, "count")
				evs = waitIdle(t, n, c, sid, 2)
				results := ofType(evs, "agent.tool_result")
				if got := results[len(results)-1].text(); strings.Count(got, "x") != 1 {
					t.Fatalf("/workspace/log is %q after recovery, want the line exactly once", got)
				}
			})
		})
	}
}
