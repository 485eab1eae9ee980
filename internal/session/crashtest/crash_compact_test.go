package crashtest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/session"
)

const crashSummary = "SUMMARY: long notes 1 to 4."

func isSummaryRequest(r anthropictest.Request) bool {
	return strings.Contains(lastUserText(r), "too long for the context window")
}

// TestCrashMidCompaction: the daemon dies after a compaction's summary
// request was journalled and before it was sent. After the restart the
// conversation is compacted exactly once (one summary request, one
// agent.thread_context_compacted), the turn's request and the next turn's
// start with that summary and leave the compacted notes out, and every
// user message is still listed.
func TestCrashMidCompaction(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			raw, _ := json.Marshal(r.Messages)
			in := int64(len(raw)+len(r.System)) / 4
			if isSummaryRequest(r) {
				return anthropictest.Turn{Text: crashSummary, InputTokens: in}
			}
			return anthropictest.Turn{Text: fmt.Sprintf("answer %d", len(r.Messages)), InputTokens: in}
		})
		// A 4000-token window compacted at half: the sixth note of about
		// 375 tokens passes 2000.
		n := newNode(t, engine, fake.URL, fmt.Sprintf("[models.\"claude-sonnet-4-5\"]\nprovider = \"anthropic\"\nbase_url = %q\napi_key = \"sk-fake\"\ncontext_window = 4000\ncompact_at = 0.5\n", fake.URL))
		n.start()
		c := n.client()
		sid := newSession(t, c)
		note := func(i int) string { return fmt.Sprintf("note %d: ", i) + strings.Repeat("lorem ipsum ", 125) }
		for i := 1; i <= 5; i++ {
			send(t, c, sid, note(i))
			waitIdle(t, n, c, sid, i)
		}
		if evs := events(t, c, sid); len(ofType(evs, "agent.thread_context_compacted")) != 0 {
			t.Fatalf("compacted before the threshold: %v", types(evs))
		}
		n.arm(session.FailMidCompaction)
		send(t, c, sid, note(6))
		n.waitReached(session.FailMidCompaction)
		n.kill()
		n.disarm(session.FailMidCompaction)
		n.start()
		c = n.client()
		waitIdle(t, n, c, sid, 6)
		send(t, c, sid, note(7))
		evs := waitIdle(t, n, c, sid, 7)
		checkTrajectory(t, evs)
		if got := ofType(evs, "agent.thread_context_compacted"); len(got) != 1 || !strings.Contains(got[0].Raw, crashSummary) {
			t.Fatalf("compaction events %v, want one with the summary", got)
		}
		users := ofType(evs, "user.message")
		if len(users) != 7 || !strings.Contains(users[0].text(), "note 1: ") {
			t.Fatalf("%d user messages listed", len(users))
		}
		reqs := fake.Requests()
		summaries := 0
		for _, r := range reqs {
			if isSummaryRequest(r) {
				summaries++
			}
		}
		if summaries != 1 {
			t.Fatalf("%d summary requests, want 1", summaries)
		}
		// The turn's request after the restart and the next turn's.
		for _, r := range reqs[len(reqs)-2:] {
			if first := r.Blocks(0)[0].Text; !strings.Contains(first, crashSummary) {
				t.Fatalf("request starts with %q, want the summary", first)
			}
			raw, _ := json.Marshal(r.Messages)
			if strings.Contains(string(raw), "note 1: ") || !strings.Contains(string(raw), "note 5: ") {
				t.Fatalf("request after the compaction: %s", raw)
			}
		}
	})
}
