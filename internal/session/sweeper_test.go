package session_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Main(m)) }

func TestSweeperDeletesExpiredSessionsOnItsInterval(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	// The store compares expiresAt with the time the sweeper passes, so the
	// fake clock decides what has expired.
	start := time.Now().UTC().Truncate(time.Second)
	fake := clock.NewFake(start)
	soon, later := start.Add(90*time.Second), start.Add(time.Hour)
	for id, exp := range map[string]*time.Time{"s-soon": &soon, "s-later": &later, "s-never": nil} {
		if _, err := st.CreateSession(ctx, store.CreateSessionParams{ID: id, TenantID: "t", AgentType: "a", ExpiresAt: exp}); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.StageChanges(ctx, store.StagedChange{SessionID: "s-never", StepID: "step-1",
		Messages: []store.NewMessage{{Role: "user", Content: json.RawMessage(`"hi"`)}}}); err != nil {
		t.Fatal(err)
	}

	swept := make(chan session.SweepResult)
	sw := session.NewSweeper(st, session.SweeperConfig{Interval: time.Minute, Clock: fake, Swept: swept})
	if err := sw.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer sw.Stop()

	fake.BlockUntilWaiting(1)
	fake.Advance(time.Minute) // t+60s: nothing expired yet
	if r := <-swept; r.Err != nil || r.ExpiredSessions != 0 {
		t.Fatalf("first sweep: %+v", r)
	}
	fake.BlockUntilWaiting(1)
	fake.Advance(time.Minute) // t+120s: s-soon expired
	if r := <-swept; r.Err != nil || r.ExpiredSessions != 1 {
		t.Fatalf("second sweep: %+v", r)
	}
	for id, want := range map[string]bool{"s-soon": false, "s-later": true, "s-never": true} {
		if ok, err := st.SessionExists(ctx, id); err != nil || ok != want {
			t.Fatalf("%s exists = %v (%v), want %v", id, ok, err, want)
		}
	}
	sw.Stop()
	sw.Stop() // idempotent
}
