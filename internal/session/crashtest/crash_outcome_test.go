package crashtest

import (
	"context"
	"encoding/json"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/session"
)

func isGrader(r anthropictest.Request) bool {
	for _, t := range r.Tools {
		if strings.Contains(string(t), `"submit_verdict"`) {
			return true
		}
	}
	return false
}

// TestKillDuringOutcomeEvaluation: the daemon is SIGKILLed while the
// grader of an outcome's first evaluation is being asked. After the
// restart the evaluation goes on (not begun anew: one start, one end per
// iteration), its needs_revision verdict reaches the agent, which revises,
// and the second evaluation passes.
func TestKillDuringOutcomeEvaluation(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		var graded atomic.Int64
		var revisedWithFeedback atomic.Bool
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			if isGrader(r) {
				graded.Add(1)
				v := map[string]any{"result": "needs_revision", "explanation": "add a title"}
				if r.AssistantTurns() > 0 {
					v = map[string]any{"result": "satisfied", "explanation": "titled"}
				}
				return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "submit_verdict", Input: v}}}
			}
			if r.AssistantTurns() == 0 {
				return anthropictest.Turn{Text: "v1"}
			}
			if strings.Contains(lastUserText(r), "add a title") {
				revisedWithFeedback.Store(true)
			}
			return anthropictest.Turn{Text: "v2"}
		})
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newSession(t, c)
		n.arm(session.FailMidEvaluation)
		_, err := c.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserDefineOutcome: &anthropic.BetaManagedAgentsUserDefineOutcomeEventParams{
				Type: anthropic.BetaManagedAgentsUserDefineOutcomeEventParamsTypeUserDefineOutcome, Description: "Write a poem.",
				Rubric: anthropic.BetaManagedAgentsUserDefineOutcomeEventParamsRubricUnion{OfText: &anthropic.BetaManagedAgentsTextRubricParams{
					Type: anthropic.BetaManagedAgentsTextRubricParamsTypeText, Content: "It has a title."}}}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		n.waitReached(session.FailMidEvaluation)
		n.kill()
		n.disarm(session.FailMidEvaluation)
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		checkTrajectory(t, evs)

		starts, ends := ofType(evs, "span.outcome_evaluation_start"), ofType(evs, "span.outcome_evaluation_end")
		var results []string
		for i, e := range ends {
			var b struct {
				Iteration int64  `json:"iteration"`
				Result    string `json:"result"`
				StartID   string `json:"outcome_evaluation_start_id"`
			}
			_ = json.Unmarshal([]byte(e.Raw), &b)
			if i >= len(starts) || b.StartID != starts[i].ID || b.Iteration != int64(i) {
				t.Fatalf("evaluation end %d %s does not close start %d of %v", i, e.Raw, i, types(evs))
			}
			results = append(results, b.Result)
		}
		if len(starts) != 2 || !slices.Equal(results, []string{"needs_revision", "satisfied"}) {
			t.Fatalf("evaluations: %d starts, results %v; trajectory %v", len(starts), results, types(evs))
		}
		if len(ofType(evs, "session.status_rescheduled")) != 1 || len(ofType(evs, "session.status_idle")) != 1 {
			t.Fatalf("trajectory %v", types(evs))
		}
		var texts []string
		for _, e := range ofType(evs, "agent.message") {
			texts = append(texts, e.text())
		}
		if !slices.Equal(texts, []string{"v1", "v2"}) || !revisedWithFeedback.Load() {
			t.Fatalf("agent said %q (feedback seen: %v); want v1, then v2 after the grader's feedback", texts, revisedWithFeedback.Load())
		}
		// The grader was asked once per evaluation: the killed one never
		// got its request out.
		if got := graded.Load(); got != 2 {
			t.Fatalf("grader asked %d times, want 2", got)
		}
	})
}
