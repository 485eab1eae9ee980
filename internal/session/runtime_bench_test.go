package session

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

type fixedModels struct{ p model.Provider }

func (f fixedModels) Resolve(id string) (*model.Resolved, error) {
	return &model.Resolved{Provider: f.p, Model: id, MaxTokens: model.DefaultMaxTokens}, nil
}

// BenchmarkTurnOverhead measures the runtime's own cost of one turn: the
// scripted provider answers at once and calls no tool, so what is left is
// the run row, the events (user.message, status_running, span start/end,
// agent.message, status_idle), the session updates and the conversation
// fold, on SQLite.
//
//	go test -run '^$' -bench TurnOverhead -benchtime 2000x ./internal/session/
func BenchmarkTurnOverhead(b *testing.B) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	log := NewEventLog(st, EventLogConfig{})
	defer log.Close()
	prov := model.NewScripted(model.Script{Loop: true, Turns: []model.ScriptTurn{{Text: "ok", Usage: &model.Usage{InputTokens: 10, OutputTokens: 2}}}})
	rt, err := NewRuntime(RuntimeConfig{Store: st, Events: log, Models: fixedModels{prov}, Owner: "bench/1"})
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer rt.Stop()
	a, _ := st.CreateAgent(ctx, &store.Agent{TenantID: "t1", Doc: json.RawMessage(`{"model":{"id":"scripted"},"tools":[]}`)})
	s, _ := st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: "t1", AgentID: a.ID, AgentVersion: a.Version, Doc: json.RawMessage(`{}`)})
	sub, err := log.Subscribe(ctx, s.ID, 0)
	if err != nil {
		b.Fatal(err)
	}
	msg := newEvent(EventUserMessage, map[string]any{"content": textContent("hi")})
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
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
