package session

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// windowModels serves every model id with p; "small" has a 4000-token
// window compacted at half, any other none.
type windowModels struct{ p model.Provider }

func (m windowModels) Resolve(id string) (*model.Resolved, error) {
	r := &model.Resolved{Provider: m.p, Model: id, MaxTokens: model.DefaultMaxTokens, CompactAt: 0.5}
	if id == "small" {
		r.ContextWindow = 4000
	}
	return r, nil
}

// BenchmarkCompaction prices a compaction: two sessions get the same five
// notes of about 375 tokens, one on a model with a 4000-token window
// compacted at half, one without a window; the sixth note's turn passes
// 2000 tokens and compacts (the scripted provider writes the summary, so
// what is measured is agentkernel's own cost: the estimate, the journalled
// summary request, the event, the fold). It reports that turn's time in
// both sessions, their difference, and the compaction's token estimates
// before and after.
//
//	go test -run '^$' -bench Compaction -benchtime 30x ./internal/session/
func BenchmarkCompaction(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	log := NewEventLog(st, EventLogConfig{})
	b.Cleanup(func() { log.Close() })
	scripted := model.NewScripted(model.Script{Loop: true, Turns: []model.ScriptTurn{{Text: "noted"}}})
	rt, err := NewRuntime(RuntimeConfig{Store: st, Events: log, Models: windowModels{scripted}, Owner: "bench/1"})
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(rt.Stop)
	newSession := func(modelID string) (func(text string) time.Duration, string) {
		a, _ := st.CreateAgent(ctx, &store.Agent{TenantID: "t1", Doc: json.RawMessage(`{"model":{"id":"` + modelID + `"},"tools":[]}`)})
		s, _ := st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: "t1", AgentID: a.ID, AgentVersion: a.Version, Doc: json.RawMessage(`{}`)})
		sub, err := log.Subscribe(ctx, s.ID, 0)
		if err != nil {
			b.Fatal(err)
		}
		return func(text string) time.Duration {
			t0 := time.Now()
			if _, err := log.Append(ctx, s.ID, []store.NewEvent{newEvent(EventUserMessage, map[string]any{"content": textContent(text)})}); err != nil {
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
			return time.Since(t0)
		}, s.ID
	}
	note := func(i int) string { return fmt.Sprintf("note %d: ", i) + strings.Repeat("lorem ipsum ", 125) }
	var with, without time.Duration
	var before, after int64
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		small, sid := newSession("small")
		big, _ := newSession("big")
		for j := 1; j <= 5; j++ {
			small(note(j))
			big(note(j))
		}
		with += small(note(6))
		without += big(note(6))
		b.StopTimer()
		evs, err := st.ListEvents(ctx, store.ListEventsParams{SessionID: sid, Types: []string{EventThreadContextCompacted}, Limit: 10})
		if err != nil || len(evs) != 1 {
			b.Fatalf("%d compactions (%v)", len(evs), err)
		}
		var body compactionBody
		_ = json.Unmarshal(evs[0].Data, &body)
		before, after = body.TokensBefore, body.TokensAfter
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(with.Microseconds())/n, "compacting-turn-µs")
	b.ReportMetric(float64(without.Microseconds())/n, "plain-turn-µs")
	b.ReportMetric(float64((with-without).Microseconds())/n, "compaction-µs")
	b.ReportMetric(float64(before), "tokens-before")
	b.ReportMetric(float64(after), "tokens-after")
}
