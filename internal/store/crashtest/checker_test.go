package crashtest

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"path/filepath"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// TestCheckerCatchesPartialWrites shows the checker is not vacuous: each
// case commits three iterations properly and then writes one piece of an
// iteration outside the atomic call, which is what a non-atomic engine would
// leave behind after a kill. checkStore must reject every one of them.
func TestCheckerCatchesPartialWrites(t *testing.T) {
	ctx := context.Background()
	msg := func(i int64, kind string) []store.NewMessage {
		b, _ := json.Marshal(msgContent{I: i, Kind: kind})
		return []store.NewMessage{{Role: "user", Content: b}}
	}
	cases := map[string]func(s store.Store) error{
		"message without its checkpoint": func(s store.Store) error {
			_, err := s.AppendMessages(ctx, sessionID, msg(4, "append"))
			return err
		},
		"state without its checkpoint": func(s store.Store) error {
			_, err := s.MergeCustomState(ctx, sessionID, json.RawMessage(`{"i":4}`))
			return err
		},
		"checkpoint without its messages": func(s store.Store) error {
			_, err := s.CreateCheckpoint(ctx, sessionID, store.CheckpointMeta{StepCount: 4})
			return err
		},
		"promoted change still staged": func(s store.Store) error {
			return s.StageChanges(ctx, store.StagedChange{SessionID: sessionID, StepID: stepID(2),
				Messages: msg(2, "staged"), StateWrites: json.RawMessage(`{"staged_i":2}`)})
		},
		"version moved without a checkpoint": func(s store.Store) error {
			_, err := s.UpdateStatus(ctx, store.UpdateStatusParams{SessionID: sessionID, Status: store.StatusActive})
			return err
		},
		"messages lost": func(s store.Store) error {
			return s.TruncateMessages(ctx, sessionID, 5)
		},
	}
	for name, breakIt := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			sess, err := s.CreateSession(ctx, store.CreateSessionParams{ID: sessionID, AgentType: "crashtest"})
			if err != nil {
				t.Fatal(err)
			}
			version := sess.Version
			for i := int64(1); i <= 3; i++ {
				if version, err = commitIteration(ctx, s, i, version); err != nil {
					t.Fatal(err)
				}
			}
			if snap, err := checkStore(ctx, s); err != nil || snap.n != 3 || snap.version != version {
				t.Fatalf("intact store: snapshot %+v, %v; want 3 iterations at version %d", snap, err, version)
			}
			if err := breakIt(s); err != nil {
				t.Fatalf("breaking the store: %v", err)
			}
			var v *violation
			_, err = checkStore(ctx, s)
			if !errors.As(err, &v) {
				t.Fatalf("checkStore accepted a store with a %s (err %v)", name, err)
			}
			t.Logf("rejected: %v", err)
		})
	}
}

// TestCheckerCatchesSandboxFactsWithoutHistory: the sandbox half of the
// checker is not vacuous either. A sandbox's facts changed behind the
// store's back (as an engine that wrote them without their history entry
// would leave them), or a history entry lost, is rejected.
func TestCheckerCatchesSandboxFactsWithoutHistory(t *testing.T) {
	ctx := context.Background()
	for name, sqlText := range map[string]string{
		"facts without their entry": `UPDATE sandboxes SET handle = NULL, started_at = NULL, version = version + 1 WHERE id = 'sbx_crashtest'`,
		"entry without its facts":   `DELETE FROM sandbox_transitions WHERE seq = (SELECT max(seq) FROM sandbox_transitions)`,
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			s, err := sqlite.Open(ctx, path)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.CreateSession(ctx, store.CreateSessionParams{ID: sessionID, AgentType: "crashtest"}); err != nil {
				t.Fatal(err)
			}
			sb, err := s.CreateSandbox(ctx, &store.Sandbox{ID: sandboxID, TenantID: "tnt_crashtest"})
			if err != nil {
				t.Fatal(err)
			}
			for range 3 {
				if sb, err = toggleSandbox(ctx, s, sb); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := checkStore(ctx, s); err != nil {
				t.Fatalf("intact store: %v", err)
			}
			db, err := sql.Open("sqlite", path)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := db.ExecContext(ctx, sqlText); err != nil {
				t.Fatal(err)
			}
			var v *violation
			if _, err = checkStore(ctx, s); !errors.As(err, &v) {
				t.Fatalf("checkStore accepted a store with %s (err %v)", name, err)
			}
			t.Logf("rejected: %v", err)
		})
	}
}
