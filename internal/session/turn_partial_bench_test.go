package session

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// BenchmarkStreamedTurn prices saving the block in progress: a turn whose
// answer streams as 256 deltas (about 256 tokens), on SQLite, in three
// sessions: one whose partial output is saved per batch (the default), one
// saved per delta, and one not saved at all (a provider that cannot
// continue a prefill: the behaviour before issue 13). Each iteration runs
// one turn of each, so the ratios it reports compare turns run under the
// same load.
//
//	go test -run '^$' -bench StreamedTurn -benchtime 500x ./internal/session/
func BenchmarkStreamedTurn(b *testing.B) {
	deltas := make([]string, 256)
	for i := range deltas {
		deltas[i] = "tok" + strings.Repeat("en", i%3) + " "
	}
	turn := model.ScriptTurn{Deltas: deltas, Usage: &model.Usage{InputTokens: 10, OutputTokens: 256}}
	scripted := model.NewScripted(model.Script{Loop: true, Turns: []model.ScriptTurn{turn}})
	unsaved := benchSession(b, model.ProviderFunc(scripted.Stream)) // not a PartialStreamer
	batched := benchSession(b, scripted)
	perDelta := benchSession(b, scripted)
	timed := func(turn func()) time.Duration {
		t0 := time.Now()
		turn()
		return time.Since(t0)
	}
	var tu, tb, tp time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		tu += timed(unsaved)
		tb += timed(batched)
		partialSaveDeltas = 1
		tp += timed(perDelta)
		partialSaveDeltas = PartialSaveDeltas
	}
	n := float64(b.N)
	b.ReportMetric(float64(tu.Microseconds())/n, "unsaved-µs/turn")
	b.ReportMetric(float64(tb.Microseconds())/n, "batched-µs/turn")
	b.ReportMetric(float64(tp.Microseconds())/n, "per-delta-µs/turn")
	b.ReportMetric(float64(tb)/float64(tu), "batched/unsaved")
	b.ReportMetric(float64(tp)/float64(tu), "per-delta/unsaved")
}

// benchSession starts a runtime on its own SQLite store with one session
// answered by p; the function it returns runs one turn.
func benchSession(b *testing.B, p model.Provider) func() {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	log := NewEventLog(st, EventLogConfig{})
	b.Cleanup(func() { log.Close() })
	rt, err := NewRuntime(RuntimeConfig{Store: st, Events: log, Models: fixedModels{p}, Owner: "bench/1"})
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rt.Stop)
	a, _ := st.CreateAgent(ctx, &store.Agent{TenantID: "t1", Doc: json.RawMessage(`{"model":{"id":"scripted"},"tools":[]}`)})
	s, _ := st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: "t1", AgentID: a.ID, AgentVersion: a.Version, Doc: json.RawMessage(`{}`)})
	sub, err := log.Subscribe(ctx, s.ID, 0)
	if err != nil {
		b.Fatal(err)
	}
	msg := newEvent(EventUserMessage, map[string]any{"content": textContent("hi")})
	return func() {
		msg.ID = ""
		if _, err := log.Append(ctx, s.ID, []store.NewEvent{msg}); err != nil {
			b.Fatal(err)
		}
		rt.Wake(s.ID)
		for ev := range sub {
			if ev.Type == EventStatusIdle {
				break
			}
			if ev.Type == EventSessionError {
				b.Fatalf("turn failed: %s", ev.Data)
			}
		}
	}
}
