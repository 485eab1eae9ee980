package crashtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

const (
	childEngineEnv = "CRASHTEST_CHILD_ENGINE"
	childDSNEnv    = "CRASHTEST_CHILD_DSN"
	childSchemaEnv = "CRASHTEST_CHILD_SCHEMA"
	sessionID      = "sesn_crashtest"
	sandboxID      = "sbx_crashtest"
)

// msgContent is the content of every message the child writes: which
// iteration it belongs to and which write path put it there.
type msgContent struct {
	I    int64  `json:"i"`
	Kind string `json:"kind"` // "append" (AppendMessages) or "staged" (promoted)
}

func stepID(i int64) string { return fmt.Sprintf("step-%d", i) }

// runChild is the child's life: open the store, find (or create) the
// session, resume after the latest checkpoint and commit iteration after
// iteration until killed. It reports on stdout "ready <n> <version>" once it
// has resumed from iteration n, and "acked <i> <version>" after each commit
// returns. Any error is a test failure: it exits non-zero, which the parent
// sees as a child that died before it was killed.
func runChild() int {
	ctx := context.Background()
	e := engine{name: os.Getenv(childEngineEnv), dsn: os.Getenv(childDSNEnv), schema: os.Getenv(childSchemaEnv)}
	if err := childLoop(ctx, e); err != nil {
		fmt.Fprintf(os.Stderr, "crashtest child (%s): %v\n", e.name, err)
		return 2
	}
	return 0
}

func childLoop(ctx context.Context, e engine) error {
	s, err := e.open(ctx)
	if err != nil {
		return fmt.Errorf("open: %w", err)
	}
	defer s.Close()
	sess, err := s.GetSession(ctx, sessionID)
	if errors.Is(err, store.ErrNotFound) {
		sess, err = s.CreateSession(ctx, store.CreateSessionParams{ID: sessionID, AgentType: "crashtest"})
	}
	if err != nil {
		return fmt.Errorf("load or create session: %w", err)
	}
	var n int64
	if sess.CheckpointID != "" {
		cp, err := s.GetLatestCheckpoint(ctx, sessionID)
		if err != nil {
			return fmt.Errorf("resume: latest checkpoint: %w", err)
		}
		n = cp.StepCount
	}
	version := sess.Version
	sb, err := s.GetSandbox(ctx, sandboxID)
	if errors.Is(err, store.ErrNotFound) {
		sb, err = s.CreateSandbox(ctx, &store.Sandbox{ID: sandboxID, TenantID: "tnt_crashtest"})
	}
	if err != nil {
		return fmt.Errorf("load or create sandbox: %w", err)
	}
	fmt.Printf("ready %d %d\n", n, version)

	for i := n + 1; ; i++ {
		if sb, err = toggleSandbox(ctx, s, sb); err != nil {
			return err
		}
		if version, err = commitIteration(ctx, s, i, version); err != nil {
			return err
		}
		fmt.Printf("acked %d %d\n", i, version)
	}
}

// commitIteration is one step of the child: stage iteration i's output (a
// message and a custom-state write), then save its state, append its own
// message, promote the staged change and checkpoint, all in the one atomic
// call, expecting the version the previous commit returned.
func commitIteration(ctx context.Context, s store.Store, i, version int64) (int64, error) {
	staged, _ := json.Marshal(msgContent{I: i, Kind: "staged"})
	writes, _ := json.Marshal(map[string]int64{"staged_i": i})
	err := s.StageChanges(ctx, store.StagedChange{
		SessionID:   sessionID,
		StepID:      stepID(i),
		Messages:    []store.NewMessage{{Role: "assistant", Content: staged}},
		StateWrites: writes,
	})
	if err != nil {
		return 0, fmt.Errorf("iteration %d: stage: %w", i, err)
	}
	appended, _ := json.Marshal(msgContent{I: i, Kind: "append"})
	custom, _ := json.Marshal(map[string]int64{"i": i})
	res, err := s.SaveStateAndPromoteStaging(ctx, store.SaveAndPromoteParams{
		SessionID:       sessionID,
		State:           store.SessionState{Status: store.StatusActive, CustomState: custom, StepCount: i},
		AppendMessages:  []store.NewMessage{{Role: "user", Content: appended}},
		Checkpoint:      store.CheckpointMeta{StepCount: i},
		ExpectedVersion: &version,
	})
	if err != nil {
		return 0, fmt.Errorf("iteration %d: save and promote (expected version %d): %w", i, version, err)
	}
	if res.PromotedStages != 1 {
		return 0, fmt.Errorf("iteration %d: promoted %d staged changes, want 1", i, res.PromotedStages)
	}
	return res.NewVersion, nil
}

// toggleSandbox moves the sandbox between cold and warming by writing the
// facts (a handle and its start, or none): every update is a transition,
// so its history must hold one entry per version (checkSandboxHistory).
func toggleSandbox(ctx context.Context, s store.Store, sb *store.Sandbox) (*store.Sandbox, error) {
	next := *sb
	if len(next.Handle) == 0 {
		now := time.Now()
		next.Handle, next.StartedAt, next.Generation = json.RawMessage(`{"pid":1}`), &now, next.Generation+1
	} else {
		next.Handle, next.StartedAt = nil, nil
	}
	out, err := s.UpdateSandbox(ctx, &next)
	if err != nil {
		return nil, fmt.Errorf("update sandbox at version %d: %w", sb.Version, err)
	}
	return out, nil
}
