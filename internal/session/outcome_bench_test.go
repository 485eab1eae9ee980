package session

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// BenchmarkOutcomeTurn measures the runtime's cost of an outcome
// evaluation: two sessions on one runtime, run turn by turn in one loop so
// both see the same load — a plain turn (user.message, the scripted model
// answers at once) and a turn that works on an outcome (user.define_outcome,
// the same answer, then one evaluation by a scripted grader satisfied at
// once: its journalled request, its start, ongoing and end spans and their
// fold), on SQLite. eval-ms is the difference.
//
//	go test -run '^$' -bench OutcomeTurn -benchtime 500x -count 3 ./internal/session/
func BenchmarkOutcomeTurn(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	log := NewEventLog(st, EventLogConfig{})
	defer log.Close()
	verdict := json.RawMessage(`{"result":"satisfied","explanation":"ok"}`)
	prov := model.NewScripted(model.Script{Loop: true,
		Turns:  []model.ScriptTurn{{Text: "ok", Usage: &model.Usage{InputTokens: 10, OutputTokens: 2}}},
		Grader: []model.ScriptTurn{{ToolCalls: []model.ScriptToolCall{{Name: verdictTool, Input: verdict}}}}})
	rt, err := NewRuntime(RuntimeConfig{Store: st, Events: log, Models: fixedModels{prov}, Owner: "bench/1"})
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer rt.Stop()
	a, _ := st.CreateAgent(ctx, &store.Agent{TenantID: "t1", Doc: json.RawMessage(`{"model":{"id":"scripted"},"tools":[]}`)})
	plain, _ := st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: "t1", AgentID: a.ID, AgentVersion: a.Version, Doc: json.RawMessage(`{}`)})
	outc, _ := st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: "t1", AgentID: a.ID, AgentVersion: a.Version, Doc: json.RawMessage(`{}`)})
	plainSub, err := log.Subscribe(ctx, plain.ID, 0)
	if err != nil {
		b.Fatal(err)
	}
	outcSub, err := log.Subscribe(ctx, outc.ID, 0)
	if err != nil {
		b.Fatal(err)
	}
	run := func(sid string, sub <-chan store.SessionEvent, ev store.NewEvent) (time.Duration, bool) {
		t0 := time.Now()
		if _, err := log.Append(ctx, sid, []store.NewEvent{ev}); err != nil {
			b.Fatal(err)
		}
		rt.Wake(sid)
		evaluated := false
		for ev := range sub {
			switch ev.Type {
			case EventOutcomeEvalEnd:
				evaluated = true
			case EventSessionError:
				b.Fatalf("turn failed: %s", ev.Data)
			}
			if ev.Type == EventStatusIdle {
				break
			}
		}
		return time.Since(t0), evaluated
	}
	var plainT, outcT time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d, _ := run(plain.ID, plainSub, newEvent(EventUserMessage, map[string]any{"content": textContent("hi")}))
		plainT += d
		d, evaluated := run(outc.ID, outcSub, newEvent(EventUserDefineOutcome, map[string]any{"outcome_id": ids.New("outc"), "description": "say ok",
			"rubric": map[string]any{"type": "text", "content": "it says ok"}, "max_iterations": 3}))
		outcT += d
		if !evaluated {
			b.Fatal("the outcome turn ended without an evaluation")
		}
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(b.N) / 1e6 }
	b.ReportMetric(ms(plainT), "plain-ms")
	b.ReportMetric(ms(outcT), "outcome-ms")
	b.ReportMetric(ms(outcT-plainT), "eval-ms")
}
