package resources

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/store"
)

// FailAfterClone: git cloned a repository resource and the op journal
// does not say so yet; a kill here leaves the op started after the call
// reached the remote.
const FailAfterClone = "after-clone"

// cloneResult is a clone's op_completed record: the commit it checked
// out, so that placing the same clone again gives the same tree.
type cloneResult struct {
	Commit string `json:"commit"`
}

// cloneOpID is the journal id of the clone of repository resource r (its
// URL and checkout: the ref) for one sandbox instance of the session. The
// instance is part of it because each new instance that needs the
// repository gets it by a clone of its own, a new call to the remote; the
// same instance asking again (a crash between the clone and the copy into
// the sandbox) is the same op.
func cloneOpID(sessionID, instance string, r *store.SessionResource, d repoDoc) (string, json.RawMessage, error) {
	args, err := json.Marshal(map[string]any{"session_id": sessionID, "resource_id": r.ID, "url": d.URL,
		"checkout": d.Checkout, "sandbox_instance": instance})
	if err != nil {
		return "", nil, err
	}
	id, err := journal.OpID(journal.KindOutboundCall, args, 0, 0, 0)
	return id, args, err
}

// journalledClone clones d into dir as a journalled outbound call (seed
// 003): op_started before git runs, op_completed with the commit after.
// Found in the journal, the op is decided by journal.Decide: a completed
// clone is replayed — cloned again and reset to the recorded commit, the
// same tree, since only the commit is recorded, not the bytes; a started
// one is redone into a fresh dir, since a clone only reads the remote.
func (s *Service) journalledClone(ctx context.Context, sessionID, instance string, r *store.SessionResource, d repoDoc, token, dir string) error {
	opID, args, err := cloneOpID(sessionID, instance, r, d)
	if err != nil {
		return err
	}
	op, err := s.cfg.Store.StartOp(ctx, &store.Op{ID: opID, SessionID: sessionID, Kind: journal.KindOutboundCall,
		Args: args, Status: store.OpStarted, StartedAt: s.cfg.Now()})
	switch {
	case errors.Is(err, store.ErrAlreadyExists) && op != nil:
		act, derr := journal.Decide(op.Kind, journal.State{Completed: op.Status == store.OpCompleted, ReadOnly: true})
		if derr != nil {
			return derr
		}
		switch act {
		case journal.Replay:
			var res cloneResult
			if err := json.Unmarshal(op.Result, &res); err != nil {
				return fmt.Errorf("op %s: recorded clone result: %w", opID, err)
			}
			s.log.InfoContext(ctx, "repository clone replayed at its recorded commit", "session", sessionID, "resource", r.ID, "op_id", opID, "commit", res.Commit)
			return s.cloneAt(ctx, d, token, dir, res.Commit)
		case journal.Redo:
			s.log.InfoContext(ctx, "repository clone cut off by a crash: cloning again", "session", sessionID, "resource", r.ID, "op_id", opID)
		default:
			return fmt.Errorf("op %s: no clone recovery for %q", opID, act)
		}
	case err != nil:
		return fmt.Errorf("journal the clone: %w", err)
	}
	// A fresh dir: whatever a cut-off clone left there is not trusted.
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := s.clone(ctx, d, token, dir); err != nil {
		// A failed clone changed nothing anywhere: it is recorded as
		// started only, and the next placement redoes it.
		return err
	}
	s.failpoint(FailAfterClone)
	commit, err := s.head(ctx, dir)
	if err != nil {
		return err
	}
	res, _ := json.Marshal(cloneResult{Commit: commit})
	if _, err := s.cfg.Store.CompleteOp(context.WithoutCancel(ctx), sessionID, opID, res); err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("journal the clone's result: %w", err)
	}
	return nil
}

// cloneAt clones d and resets it to commit.
func (s *Service) cloneAt(ctx context.Context, d repoDoc, token, dir, commit string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	if err := s.clone(ctx, d, token, dir); err != nil {
		return err
	}
	if commit == "" {
		return nil // an empty repository then, and still nothing to check out
	}
	if out, err := s.localGit(ctx, dir, "reset", "--quiet", "--hard", commit); err != nil {
		return fmt.Errorf("git reset to the recorded commit %s: %w: %s", commit, err, out)
	}
	return nil
}

// head is the commit dir has checked out ("" for the clone of an empty
// repository, which has none).
func (s *Service) head(ctx context.Context, dir string) (string, error) {
	out, err := s.localGit(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.ExitCode() == 1 && out == "" {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("git rev-parse HEAD: %w: %s", err, out)
	}
	return out, nil
}

// localGit runs git on the clone in dir, with no configuration from the
// host and nothing reaching the network.
func (s *Service) localGit(ctx context.Context, dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, s.cfg.Git, append([]string{"-C", dir}, args...)...)
	cmd.Env = []string{"GIT_TERMINAL_PROMPT=0", "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null", "PATH=" + os.Getenv("PATH"),
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=core.hooksPath", "GIT_CONFIG_VALUE_0=/dev/null"}
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
