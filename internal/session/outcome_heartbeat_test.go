package session

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// TestOutcomeHeartbeat: while the grader is being asked, one
// span.outcome_evaluation_ongoing goes out at once and another each
// OutcomeHeartbeat (driven by a fake clock); an interrupt then ends the
// evaluation as interrupted.
func TestOutcomeHeartbeat(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	log := NewEventLog(st, EventLogConfig{})
	defer log.Close()
	prov := model.NewScripted(model.Script{Turns: []model.ScriptTurn{{Text: "done"}},
		Grader: []model.ScriptTurn{{DelayMS: 600_000, Text: "{}"}}})
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rt, err := NewRuntime(RuntimeConfig{Store: st, Events: log, Models: fixedModels{prov}, Owner: "hb/1",
		Clock: fake, OutcomeHeartbeat: 10 * time.Second, RecoverEvery: time.Hour, BackgroundPoll: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer rt.Stop()
	a, _ := st.CreateAgent(ctx, &store.Agent{TenantID: "t1", Doc: json.RawMessage(`{"model":{"id":"scripted"},"tools":[]}`)})
	s, _ := st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: "t1", AgentID: a.ID, AgentVersion: a.Version, Doc: json.RawMessage(`{}`)})
	sctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	sub, err := log.Subscribe(sctx, s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	until := func(typ string) {
		t.Helper()
		for ev := range sub {
			seen = append(seen, ev.Type)
			if ev.Type == typ {
				return
			}
		}
		t.Fatalf("no %s: %v", typ, seen)
	}
	def := newEvent(EventUserDefineOutcome, map[string]any{"outcome_id": "outc_hb", "description": "d",
		"rubric": map[string]any{"type": "text", "content": "r"}, "max_iterations": 3})
	if _, err := log.Append(ctx, s.ID, []store.NewEvent{def}); err != nil {
		t.Fatal(err)
	}
	rt.Wake(s.ID)
	until(EventOutcomeEvalOngoing)
	for beat := 0; beat < 2; beat++ {
		fake.BlockUntilWaiting(3) // the orphan sweep, the background poll and the heartbeat
		fake.Advance(10 * time.Second)
		until(EventOutcomeEvalOngoing)
	}
	if _, err := log.Append(ctx, s.ID, []store.NewEvent{newEvent(EventUserInterrupt, nil)}); err != nil {
		t.Fatal(err)
	}
	rt.Wake(s.ID)
	until(EventStatusIdle)
	n := 0
	for _, typ := range seen {
		if typ == EventOutcomeEvalOngoing {
			n++
		}
	}
	evs, _ := st.ListEvents(ctx, store.ListEventsParams{SessionID: s.ID, Types: []string{EventOutcomeEvalEnd}})
	if n != 3 || len(evs) != 1 || !json.Valid(evs[0].Data) || body(t, evs[0]).Result != OutcomeInterrupted {
		t.Fatalf("%d ongoing spans (want 3), ends %v; events %v", n, evs, seen)
	}
}
