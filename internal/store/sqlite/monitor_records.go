package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// SaveTranscript implements store.MonitorStore.
func (s *Store) SaveTranscript(ctx context.Context, t *store.Transcript) (*store.Transcript, error) {
	in := *t
	if in.ID == "" {
		in.ID = ids.New("trn")
	}
	if in.SandboxID == "" && in.TaskID == "" {
		return nil, fmt.Errorf("transcript %s: needs a task or sandbox id: %w", in.ID, store.ErrInvalid)
	}
	if in.Size < 0 {
		return nil, fmt.Errorf("transcript %s: negative size %d: %w", in.ID, in.Size, store.ErrInvalid)
	}
	in.SavedAt = orNow(in.SavedAt, s.timestamp())
	var out *store.Transcript
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		out, err = scanTranscript(tx.QueryRowContext(ctx, `INSERT INTO transcripts (`+transcriptCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING RETURNING `+transcriptCols,
			in.ID, in.TaskID, in.SandboxID, in.Source, in.Content, in.BlobKey, in.Size, in.SHA256, micros(in.SavedAt)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("transcript %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: save transcript %q: %w", in.ID, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetTranscript implements store.MonitorStore.
func (s *Store) GetTranscript(ctx context.Context, id string) (*store.Transcript, error) {
	t, err := scanTranscript(s.read.QueryRowContext(ctx, `SELECT `+transcriptCols+` FROM transcripts WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("transcript %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get transcript %q: %w", id, err)
	}
	return t, nil
}

// LatestTranscript implements store.MonitorStore: newest SavedAt, then
// newest id (ids are time-ordered) among equal times.
func (s *Store) LatestTranscript(ctx context.Context, p store.LatestTranscriptParams) (*store.Transcript, error) {
	col, key := "task_id", p.TaskID
	if key == "" {
		col, key = "sandbox_id", p.SandboxID
	}
	if key == "" {
		return nil, fmt.Errorf("latest transcript: need a task or sandbox id: %w", store.ErrInvalid)
	}
	t, err := scanTranscript(s.read.QueryRowContext(ctx, `SELECT `+transcriptCols+` FROM transcripts
		WHERE `+col+` = ? ORDER BY saved_at DESC, id DESC LIMIT 1`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("transcript of %s %q: %w", col, key, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: latest transcript of %s %q: %w", col, key, err)
	}
	return t, nil
}

// RecordTermination implements store.MonitorStore. The primary key on
// sandbox_id is the claim; the activity's terminated_at is set in the same
// transaction so the monitor stops listing the sandbox.
func (s *Store) RecordTermination(ctx context.Context, t *store.Termination) (*store.Termination, error) {
	if t.SandboxID == "" || !t.Reason.Valid() {
		return nil, fmt.Errorf("termination of sandbox %q: need a sandbox id and a reason of idle_timeout, "+
			"heartbeat_timeout, stuck_running or post_completion (got %q): %w", t.SandboxID, t.Reason, store.ErrInvalid)
	}
	at := orNow(t.At, s.timestamp())
	var (
		out     *store.Termination
		existed bool
	)
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		existed = false
		out, err = scanTermination(tx.QueryRowContext(ctx, `INSERT INTO terminations
			(sandbox_id, task_id, tenant_id, reason, duration_us, transcript_id, node, stop_error, at, finished_at, completed)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sandbox_id) DO NOTHING RETURNING `+terminationCols,
			t.SandboxID, t.TaskID, t.TenantID, t.Reason, t.Duration.Microseconds(), t.TranscriptID, t.Node,
			t.StopError, micros(at), nullMicros(t.FinishedAt), t.Completed))
		if errors.Is(err, sql.ErrNoRows) {
			existed = true
			out, err = scanTermination(tx.QueryRowContext(ctx, `SELECT `+terminationCols+` FROM terminations
				WHERE sandbox_id = ?`, t.SandboxID))
			if err != nil {
				return fmt.Errorf("sqlite: read termination of sandbox %q: %w", t.SandboxID, err)
			}
			return nil
		}
		if err != nil {
			return fmt.Errorf("sqlite: record termination of sandbox %q: %w", t.SandboxID, err)
		}
		_, err = tx.ExecContext(ctx, `UPDATE agent_activity SET terminated_at = ? WHERE sandbox_id = ?`,
			micros(at), t.SandboxID)
		return err
	})
	if err != nil {
		return nil, err
	}
	if existed {
		return out, fmt.Errorf("sandbox %q already terminated (%s at %s): %w", t.SandboxID, out.Reason, out.At, store.ErrAlreadyExists)
	}
	return out, nil
}

// FinishTermination implements store.MonitorStore.
func (s *Store) FinishTermination(ctx context.Context, p store.FinishTerminationParams) (*store.Termination, error) {
	at := orNow(p.At, s.timestamp())
	var out *store.Termination
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		out, err = scanTermination(tx.QueryRowContext(ctx, `UPDATE terminations SET transcript_id = ?,
			stop_error = ?, finished_at = ? WHERE sandbox_id = ? AND finished_at IS NULL RETURNING `+terminationCols,
			p.TranscriptID, p.StopError, micros(at), p.SandboxID))
		if errors.Is(err, sql.ErrNoRows) {
			if _, gerr := scanTermination(tx.QueryRowContext(ctx, `SELECT `+terminationCols+` FROM terminations
				WHERE sandbox_id = ?`, p.SandboxID)); gerr == nil {
				return fmt.Errorf("termination of sandbox %q is finished already: %w", p.SandboxID, store.ErrConflict)
			}
			return fmt.Errorf("termination of sandbox %q: %w", p.SandboxID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: finish termination of sandbox %q: %w", p.SandboxID, err)
		}
		if p.Audit != nil {
			return s.appendAuditTx(ctx, tx, p.Audit)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListUnfinishedTerminations implements store.MonitorStore.
func (s *Store) ListUnfinishedTerminations(ctx context.Context, claimedBefore time.Time) ([]*store.Termination, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+terminationCols+` FROM terminations
		WHERE finished_at IS NULL AND at <= ? ORDER BY at, sandbox_id`, micros(claimedBefore))
	if err != nil {
		return nil, fmt.Errorf("sqlite: list unfinished terminations: %w", err)
	}
	return collect(rows, "terminations", scanTermination)
}

// GetTermination implements store.MonitorStore.
func (s *Store) GetTermination(ctx context.Context, sandboxID string) (*store.Termination, error) {
	t, err := scanTermination(s.read.QueryRowContext(ctx, `SELECT `+terminationCols+` FROM terminations
		WHERE sandbox_id = ?`, sandboxID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("termination of sandbox %q: %w", sandboxID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get termination of sandbox %q: %w", sandboxID, err)
	}
	return t, nil
}
