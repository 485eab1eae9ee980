package crashtest

import (
	"slices"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/session"
)

// TestCrashMidModelBlock: the daemon dies while the model streams a text
// block, after the first batch of its text was saved and before the block
// completed. After the restart the request continues the block: its last
// message is the assistant's, ending with the saved text (a prefill), and
// the model answers only the rest; the session's one agent.message is the
// saved text plus that rest, once.
//
// The model is the fake Messages API (the real wire format: the text
// streams as two text_delta events), not the scripted provider: the test
// reads the requests the daemon sent, and the path tested is the one a
// real model takes.
func TestCrashMidModelBlock(t *testing.T) {
	const full = "The answer is forty-two, computed twice."
	engines(t, func(t *testing.T, engine string) {
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			if p := prefilled(r); p != "" {
				rest, ok := strings.CutPrefix(full, p)
				if !ok {
					return anthropictest.Turn{Text: "(the prefill " + p + " does not begin the answer)"}
				}
				return anthropictest.Turn{Text: rest}
			}
			return anthropictest.Turn{Text: full}
		})
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newSession(t, c)

		n.arm(session.FailMidModelBlock)
		send(t, c, sid, "go")
		n.waitReached(session.FailMidModelBlock)
		n.kill()
		n.disarm(session.FailMidModelBlock)
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		checkTrajectory(t, evs)

		var texts []string
		for _, e := range ofType(evs, "agent.message") {
			texts = append(texts, e.text())
		}
		if !slices.Equal(texts, []string{full}) {
			t.Fatalf("agent messages %q, want the block once: [%q]", texts, full)
		}
		if len(ofType(evs, "session.status_rescheduled")) != 1 {
			t.Fatalf("want one session.status_rescheduled: %v", types(evs))
		}
		reqs := fake.Requests()
		if len(reqs) != 2 {
			t.Fatalf("the model got %d requests, want the first and the resumed one", len(reqs))
		}
		// The fake sends the first half of the text as the first delta;
		// the first delta of a block is saved at once.
		saved := strings.TrimRight(full[:len(full)/2], " ")
		if got := prefilled(reqs[1]); got != saved {
			t.Fatalf("the resumed request's prefill is %q, want the saved partial text %q", got, saved)
		}
	})
}
