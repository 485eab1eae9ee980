package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Direct tests of engine details the contract suite (storetest.Exercise in
// postgres_test.go) cannot see or does not pin down: version bumps under
// concurrent appends, the side-channel interrupt flag, a stale atomic write
// leaving staging intact, and the dangling-pointer fallback.

func newSession(t *testing.T, s *Store, id string) *store.Session {
	t.Helper()
	sess, err := s.CreateSession(context.Background(), store.CreateSessionParams{ID: id, TenantID: "tnt_a", AgentType: "a"})
	if err != nil {
		t.Fatalf("create session %s: %v", id, err)
	}
	return sess
}

func parallel(n int, fn func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { defer wg.Done(); fn(i) }()
	}
	wg.Wait()
}

func TestConcurrentAppendsGetDenseSeqs(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	sess := newSession(t, s, "sesn_append")
	const writers, calls, batch = 6, 10, 3
	parallel(writers, func(int) {
		for range calls {
			msgs := make([]store.NewMessage, batch)
			for j := range msgs {
				msgs[j] = store.NewMessage{Role: "user", Content: json.RawMessage(`{"text":"hi"}`)}
			}
			if _, err := s.AppendMessages(ctx, sess.ID, msgs); err != nil {
				t.Errorf("append: %v", err)
			}
		}
	})
	got, err := s.GetMessages(ctx, store.GetMessagesParams{SessionID: sess.ID})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != writers*calls*batch {
		t.Fatalf("%d messages, want %d", len(got), writers*calls*batch)
	}
	for i, m := range got {
		if m.Seq != int64(i+1) {
			t.Fatalf("message %d has seq %d: seqs are not dense", i, m.Seq)
		}
	}
	after, _ := s.GetSession(ctx, sess.ID)
	if after.Version != sess.Version+writers*calls {
		t.Fatalf("version %d, want %d (one bump per append)", after.Version, sess.Version+writers*calls)
	}
}

func TestCheckInterruptFlagClearsForExactlyOne(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	sess := newSession(t, s, "sesn_intr")
	if err := s.SetInterruptFlag(ctx, sess.ID, "user asked"); err != nil {
		t.Fatal(err)
	}
	const n = 8
	seen := make([]store.InterruptFlag, n)
	parallel(n, func(i int) {
		var err error
		if seen[i], err = s.CheckInterruptFlag(ctx, sess.ID); err != nil {
			t.Errorf("check: %v", err)
		}
	})
	set := 0
	for _, f := range seen {
		if f.Set {
			set++
			if f.Reason != "user asked" || f.SetAt == nil {
				t.Fatalf("flag = %+v, want reason and time", f)
			}
		}
	}
	if set != 1 {
		t.Fatalf("%d callers saw the flag, want exactly 1", set)
	}
	if after, _ := s.GetSession(ctx, sess.ID); after.Version != sess.Version {
		t.Fatalf("interrupt flag moved version %d → %d", sess.Version, after.Version)
	}
}

func TestSaveAndPromoteStaleWritesNothing(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	sess := newSession(t, s, "sesn_stale")
	if err := s.StageChanges(ctx, store.StagedChange{SessionID: sess.ID, StepID: "step1",
		Messages: []store.NewMessage{{Role: "assistant", Content: json.RawMessage(`"x"`)}}}); err != nil {
		t.Fatal(err)
	}
	stale := sess.Version - 1
	_, err := s.SaveStateAndPromoteStaging(ctx, store.SaveAndPromoteParams{
		SessionID: sess.ID, ExpectedVersion: &stale,
		State:          store.SessionState{Status: store.StatusCompleted, CustomState: json.RawMessage(`{"a":1}`)},
		AppendMessages: []store.NewMessage{{Role: "user", Content: json.RawMessage(`"y"`)}},
		Checkpoint:     store.CheckpointMeta{StepCount: 1},
	})
	var stErr *store.StaleStateError
	if !errors.As(err, &stErr) || !errors.Is(err, store.ErrVersionMismatch) || stErr.CurrentVersion != sess.Version {
		t.Fatalf("err = %v, want StaleStateError at version %d", err, sess.Version)
	}
	after, _ := s.GetSession(ctx, sess.ID)
	n, _ := s.CountMessages(ctx, sess.ID)
	staged, _ := s.HasStagedChanges(ctx, sess.ID)
	if _, cpErr := s.GetLatestCheckpoint(ctx, sess.ID); after.Version != sess.Version || after.Status != store.StatusActive ||
		n != 0 || !staged || !errors.Is(cpErr, store.ErrNotFound) {
		t.Fatalf("stale write left traces: version %d status %s messages %d staged %v checkpoint err %v",
			after.Version, after.Status, n, staged, cpErr)
	}

	res, err := s.SaveStateAndPromoteStaging(ctx, store.SaveAndPromoteParams{
		SessionID: sess.ID, ExpectedVersion: &sess.Version,
		State:          store.SessionState{Status: store.StatusCompleted, CustomState: json.RawMessage(`{"a":1}`)},
		AppendMessages: []store.NewMessage{{Role: "user", Content: json.RawMessage(`"y"`)}},
		Checkpoint:     store.CheckpointMeta{StepCount: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	msgs, _ := s.GetMessages(ctx, store.GetMessagesParams{SessionID: sess.ID})
	if res.PromotedStages != 1 || res.MessageCount != 2 || len(msgs) != 2 || msgs[0].Role != "user" ||
		msgs[1].Role != "assistant" || res.Checkpoint.MessageCount != 2 || res.NewVersion != sess.Version+1 {
		t.Fatalf("result %+v, messages %+v", res, msgs)
	}
}

func TestLatestCheckpointFollowsPointerNotStepCount(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	sess := newSession(t, s, "sesn_cp")
	if _, err := s.CreateCheckpoint(ctx, sess.ID, store.CheckpointMeta{ID: "cp_high", StepCount: 9}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateCheckpoint(ctx, sess.ID, store.CheckpointMeta{ID: "cp_low", StepCount: 1}); err != nil {
		t.Fatal(err)
	}
	latest, err := s.GetLatestCheckpoint(ctx, sess.ID)
	if err != nil || latest.ID != "cp_low" {
		t.Fatalf("latest = %v, %v; want cp_low", latest, err)
	}
	if _, err := s.pool.Exec(ctx, "UPDATE sessions SET checkpoint_id = 'cp_high' WHERE id = $1", sess.ID); err != nil {
		t.Fatal(err)
	}
	if latest, err = s.GetLatestCheckpoint(ctx, sess.ID); err != nil || latest.ID != "cp_high" {
		t.Fatalf("pointer at cp_high: latest = %v, %v", latest, err)
	}
	// A dangling pointer falls back to the newest created.
	if _, err := s.pool.Exec(ctx, "UPDATE sessions SET checkpoint_id = 'cp_gone' WHERE id = $1", sess.ID); err != nil {
		t.Fatal(err)
	}
	if latest, err = s.GetLatestCheckpoint(ctx, sess.ID); err != nil || latest.ID != "cp_low" {
		t.Fatalf("dangling pointer: latest = %v, %v; want newest created cp_low", latest, err)
	}
}
