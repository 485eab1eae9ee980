package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

func verdictTurn(result, explanation string) map[string]any {
	return map[string]any{"tool_calls": []any{map[string]any{"name": "submit_verdict",
		"input": map[string]any{"result": result, "explanation": explanation}}}}
}

func text(s string) map[string]any { return map[string]any{"text": s} }

// outcomeScripts are the scripted models of the outcome tests: the agent's
// turns and the grader's verdicts.
var outcomeScripts = map[string]map[string]any{
	"outcome-pass": {"turns": []any{text("v1")}, "grader": []any{verdictTurn("satisfied", "all criteria met")}},
	"outcome-revise": {"turns": []any{text("v1"), text("v2")},
		"grader": []any{verdictTurn("needs_revision", "the haiku has four lines"), verdictTurn("satisfied", "three lines now")}},
	"outcome-cap": {"turns": []any{text("v1"), text("v2"), text("ack")},
		"grader": []any{verdictTurn("needs_revision", "wrong"), verdictTurn("needs_revision", "still wrong")}},
	"outcome-slow": {"turns": []any{text("v1")}, "grader": []any{map[string]any{"delay_ms": 600000, "text": "{}"}}},
}

type outcomeEnv struct {
	c   anthropic.Client
	env string
}

func startOutcomes(t *testing.T) *outcomeEnv {
	c, _, env := startScripted(t, outcomeScripts)
	return &outcomeEnv{c: c, env: env}
}

// startScripted starts a daemon whose models are the scripted provider
// playing scripts (by model id), and makes an environment; it returns an
// SDK client on the admin key, the daemon and the environment's id.
func startScripted(t testing.TB, scripts map[string]map[string]any) (anthropic.Client, *daemontest.Daemon, string) {
	dir := t.TempDir()
	models := map[string]config.ModelConfig{}
	for name, script := range scripts {
		raw, _ := json.Marshal(script)
		path := filepath.Join(dir, name+".json")
		if err := os.WriteFile(path, raw, 0o600); err != nil {
			t.Fatal(err)
		}
		models[name] = config.ModelConfig{Provider: config.ProviderScripted, File: path}
	}
	d := daemontest.Start(t, func(c *config.Config) { c.Models = models })
	c := anthropic.NewClient(option.WithBaseURL(d.URL), option.WithAPIKey(d.AdminKey), option.WithMaxRetries(0))
	env, err := c.Beta.Environments.New(context.Background(), anthropic.BetaEnvironmentNewParams{Name: "scripted"})
	if err != nil {
		t.Fatal(err)
	}
	return c, d, env.ID
}

func (e *outcomeEnv) session(t *testing.T, model string) string {
	t.Helper()
	ctx := context.Background()
	agent, err := e.c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: model, Model: anthropic.BetaManagedAgentsModelConfigParams{ID: model}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agent.ID)}, EnvironmentID: e.env})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func defineOutcome(desc, rubric string, maxIter int64) anthropic.BetaManagedAgentsEventParamsUnion {
	p := &anthropic.BetaManagedAgentsUserDefineOutcomeEventParams{Type: anthropic.BetaManagedAgentsUserDefineOutcomeEventParamsTypeUserDefineOutcome,
		Description: desc, Rubric: anthropic.BetaManagedAgentsUserDefineOutcomeEventParamsRubricUnion{OfText: &anthropic.BetaManagedAgentsTextRubricParams{
			Type: anthropic.BetaManagedAgentsTextRubricParamsTypeText, Content: rubric}}}
	if maxIter > 0 {
		p.MaxIterations = anthropic.Int(maxIter)
	}
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserDefineOutcome: p}
}

func (e *outcomeEnv) send(sid string, evs ...anthropic.BetaManagedAgentsEventParamsUnion) error {
	_, err := e.c.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{Events: evs})
	return err
}

// until waits until the session's log holds an event of type typ.
func (e *outcomeEnv) until(t *testing.T, sid, typ string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for len(ofKind(e.events(t, sid), typ)) == 0 {
		if time.Now().After(deadline) {
			t.Fatalf("no %s in 60s", typ)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *outcomeEnv) events(t *testing.T, sid string) []anthropic.BetaManagedAgentsSessionEventUnion {
	t.Helper()
	page, err := e.c.Beta.Sessions.Events.List(context.Background(), sid, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	if err != nil {
		t.Fatal(err)
	}
	return page.Data
}

func ofKind(evs []anthropic.BetaManagedAgentsSessionEventUnion, typ string) []anthropic.BetaManagedAgentsSessionEventUnion {
	var out []anthropic.BetaManagedAgentsSessionEventUnion
	for _, ev := range evs {
		if string(ev.Type) == typ {
			out = append(out, ev)
		}
	}
	return out
}

func agentTexts(evs []anthropic.BetaManagedAgentsSessionEventUnion) []string {
	var out []string
	for _, ev := range ofKind(evs, "agent.message") {
		for _, b := range ev.AsAgentMessage().Content {
			out = append(out, b.Text)
		}
	}
	return out
}

// verdicts are the results of the session's evaluation ends, checked
// against their starts (one each, same outcome and iteration, in order).
func verdicts(t *testing.T, evs []anthropic.BetaManagedAgentsSessionEventUnion, outcomeID string) []string {
	t.Helper()
	starts, ends := ofKind(evs, "span.outcome_evaluation_start"), ofKind(evs, "span.outcome_evaluation_end")
	if len(starts) != len(ends) {
		t.Fatalf("%d evaluation starts, %d ends", len(starts), len(ends))
	}
	var out []string
	for i, ev := range ends {
		end, start := ev.AsSpanOutcomeEvaluationEnd(), starts[i].AsSpanOutcomeEvaluationStart()
		if end.OutcomeEvaluationStartID != start.ID || end.OutcomeID != outcomeID || start.OutcomeID != outcomeID ||
			end.Iteration != int64(i) || start.Iteration != int64(i) || end.Explanation == "" {
			t.Fatalf("evaluation %d: start %s, end %s", i, start.RawJSON(), end.RawJSON())
		}
		out = append(out, end.Result)
	}
	if len(ofKind(evs, "span.outcome_evaluation_ongoing")) < len(starts) {
		t.Fatalf("want an ongoing span per evaluation: %d for %d", len(ofKind(evs, "span.outcome_evaluation_ongoing")), len(starts))
	}
	return out
}

func (e *outcomeEnv) run(t *testing.T, model string, maxIter int64) (string, []anthropic.BetaManagedAgentsSessionEventUnion, *anthropic.BetaManagedAgentsSession) {
	sid := e.session(t, model)
	if err := e.send(sid, defineOutcome("Write a haiku about rain.", "Three lines, 5-7-5 syllables.", maxIter)); err != nil {
		t.Fatal(err)
	}
	e.until(t, sid, "session.status_idle")
	evs := e.events(t, sid)
	if n := len(ofKind(evs, "session.status_idle")); n != 1 {
		t.Fatalf("%d status_idle: the outcome's cycles are one turn", n)
	}
	idle := ofKind(evs, "session.status_idle")[0].AsSessionStatusIdle()
	if idle.StopReason.Type != "end_turn" {
		t.Fatalf("stop reason %s", idle.RawJSON())
	}
	s, err := e.c.Beta.Sessions.Get(context.Background(), sid, anthropic.BetaSessionGetParams{})
	if err != nil {
		t.Fatal(err)
	}
	return ofKind(evs, "user.define_outcome")[0].AsUserDefineOutcome().OutcomeID, evs, s
}

// TestOutcomes: user.define_outcome through the SDK against a daemon with
// the scripted provider — the grader passes at once; fails then passes
// (the agent works twice); fails until max_iterations (one last
// acknowledgment, no further evaluation); an interrupt stops a grading.
func TestOutcomes(t *testing.T) {
	e := startOutcomes(t)

	t.Run("pass", func(t *testing.T) {
		id, evs, s := e.run(t, "outcome-pass", 0)
		if got := verdicts(t, evs, id); !slices.Equal(got, []string{"satisfied"}) {
			t.Fatalf("verdicts %v", got)
		}
		if got := agentTexts(evs); !slices.Equal(got, []string{"v1"}) {
			t.Fatalf("agent said %v", got)
		}
		def := ofKind(evs, "user.define_outcome")[0].AsUserDefineOutcome()
		if !strings.HasPrefix(id, "outc_") || def.MaxIterations != 3 || def.Rubric.Content != "Three lines, 5-7-5 syllables." {
			t.Fatalf("define_outcome %s", def.RawJSON())
		}
		if len(s.OutcomeEvaluations) != 1 || s.OutcomeEvaluations[0].Result != "satisfied" || s.OutcomeEvaluations[0].OutcomeID != id ||
			s.OutcomeEvaluations[0].CompletedAt.IsZero() || s.OutcomeEvaluations[0].Explanation != "all criteria met" {
			t.Fatalf("session outcome_evaluations %+v", s.OutcomeEvaluations)
		}
	})

	t.Run("revise", func(t *testing.T) {
		id, evs, s := e.run(t, "outcome-revise", 0)
		if got := verdicts(t, evs, id); !slices.Equal(got, []string{"needs_revision", "satisfied"}) {
			t.Fatalf("verdicts %v", got)
		}
		if got := agentTexts(evs); !slices.Equal(got, []string{"v1", "v2"}) {
			t.Fatalf("agent said %v, want it to work again after the verdict", got)
		}
		if got := s.OutcomeEvaluations[0]; got.Result != "satisfied" || got.Iteration != 1 {
			t.Fatalf("outcome %+v", got)
		}
	})

	t.Run("cap", func(t *testing.T) {
		id, evs, s := e.run(t, "outcome-cap", 2)
		if got := verdicts(t, evs, id); !slices.Equal(got, []string{"needs_revision", "max_iterations_reached"}) {
			t.Fatalf("verdicts %v", got)
		}
		if got := agentTexts(evs); !slices.Equal(got, []string{"v1", "v2", "ack"}) {
			t.Fatalf("agent said %v, want two attempts and one acknowledgment", got)
		}
		if got := s.OutcomeEvaluations[0]; got.Result != "max_iterations_reached" || got.Explanation != "still wrong" {
			t.Fatalf("outcome %+v", got)
		}
	})

	t.Run("interrupt", func(t *testing.T) {
		sid := e.session(t, "outcome-slow")
		if err := e.send(sid, defineOutcome("Write a haiku.", "Three lines.", 0)); err != nil {
			t.Fatal(err)
		}
		e.until(t, sid, "span.outcome_evaluation_ongoing")
		if err := e.send(sid, anthropic.BetaManagedAgentsEventParamsUnion{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{
			Type: anthropic.BetaManagedAgentsUserInterruptEventParamsTypeUserInterrupt}}); err != nil {
			t.Fatal(err)
		}
		e.until(t, sid, "session.status_idle")
		evs := e.events(t, sid)
		id := ofKind(evs, "user.define_outcome")[0].AsUserDefineOutcome().OutcomeID
		if got := verdicts(t, evs, id); !slices.Equal(got, []string{"interrupted"}) {
			t.Fatalf("verdicts %v", got)
		}
		// A new outcome may be defined once the last one ended.
		if err := e.send(sid, defineOutcome("Again.", "Anything.", 1)); err != nil {
			t.Fatalf("define after an interrupted outcome: %v", err)
		}
	})

	t.Run("bad input", func(t *testing.T) {
		sid := e.session(t, "outcome-slow")
		raw := func(body string) error {
			return e.c.Post(context.Background(), "/v1/sessions/"+sid+"/events?beta=true", json.RawMessage(body), nil)
		}
		for _, tc := range []struct{ body, mentions string }{
			{`{"events":[{"type":"user.define_outcome","rubric":{"type":"text","content":"x"}}]}`, `events[0].description`},
			{`{"events":[{"type":"user.define_outcome","description":"d"}]}`, `events[0].rubric`},
			{`{"events":[{"type":"user.define_outcome","description":"d","rubric":{"type":"text"}}]}`, `events[0].rubric.content`},
			{`{"events":[{"type":"user.define_outcome","description":"d","rubric":{"type":"file","file_id":"file_1"}}]}`, `events[0].rubric.type" is not supported yet`},
			{`{"events":[{"type":"user.define_outcome","description":"d","rubric":{"type":"text","content":"x"},"max_iterations":21}]}`, `events[0].max_iterations`},
			{`{"events":[{"type":"user.define_outcome","description":"d","rubric":{"type":"text","content":"x"},"max_iterations":0}]}`, `events[0].max_iterations`},
			{`{"events":[{"type":"user.define_outcome","description":"d","rubric":{"type":"text","content":"x"},"grader":"me"}]}`, `events[0].grader`},
			{`{"events":[{"type":"user.define_outcome","description":"d","rubric":{"type":"text","content":"x"}},` +
				`{"type":"user.define_outcome","description":"d","rubric":{"type":"text","content":"x"}}]}`, `events[1].type`},
		} {
			err := raw(tc.body)
			var apiErr *anthropic.Error
			if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(strings.ReplaceAll(apiErr.Error(), `\"`, `"`), tc.mentions) {
				t.Errorf("%s: %v, want 400 naming %s", tc.body, err, tc.mentions)
			}
		}
		if evs := e.events(t, sid); len(evs) != 0 {
			t.Fatalf("refused events were stored: %d", len(evs))
		}
	})
}
