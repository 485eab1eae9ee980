package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

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
	in.SavedAt = orNow(in.SavedAt, s.clock())
	out, err := scanTranscript(s.pool.QueryRow(ctx, `INSERT INTO transcripts (`+transcriptCols+`)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) ON CONFLICT (id) DO NOTHING RETURNING `+transcriptCols,
		in.ID, in.TaskID, in.SandboxID, in.Source, in.Content, in.BlobKey, in.Size, in.SHA256, in.SavedAt))
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, fmt.Errorf("transcript %q: %w", in.ID, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, mapErr("save transcript "+in.ID, err)
	}
	return out, nil
}

// GetTranscript implements store.MonitorStore.
func (s *Store) GetTranscript(ctx context.Context, id string) (*store.Transcript, error) {
	t, err := scanTranscript(s.pool.QueryRow(ctx, `SELECT `+transcriptCols+` FROM transcripts WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("get transcript "+id, err)
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
	t, err := scanTranscript(s.pool.QueryRow(ctx, `SELECT `+transcriptCols+` FROM transcripts
		WHERE `+col+` = $1 ORDER BY saved_at DESC, id DESC LIMIT 1`, key))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("transcript of %s %s", col, key), err)
	}
	return t, nil
}

// RecordTermination implements store.MonitorStore. The primary key on
// sandbox_id is the claim: a racing second insert waits for the first to
// commit and then does nothing. The activity's terminated_at is set in the
// same transaction so the monitor stops listing the sandbox.
func (s *Store) RecordTermination(ctx context.Context, t *store.Termination) (*store.Termination, error) {
	if t.SandboxID == "" || !t.Reason.Valid() {
		return nil, fmt.Errorf("termination of sandbox %q: need a sandbox id and a reason of idle_timeout, "+
			"heartbeat_timeout, stuck_running or post_completion (got %q): %w", t.SandboxID, t.Reason, store.ErrInvalid)
	}
	at := orNow(t.At, s.clock())
	var (
		out     *store.Termination
		existed bool
	)
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		existed = false
		out, err = scanTermination(tx.QueryRow(ctx, `INSERT INTO terminations
			(sandbox_id, task_id, tenant_id, reason, duration_us, transcript_id, node, stop_error, at, finished_at, completed)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (sandbox_id) DO NOTHING RETURNING `+terminationCols,
			t.SandboxID, t.TaskID, t.TenantID, t.Reason, t.Duration.Microseconds(), t.TranscriptID, t.Node,
			t.StopError, at, t.FinishedAt, t.Completed))
		if errors.Is(err, pgx.ErrNoRows) {
			existed = true
			out, err = scanTermination(tx.QueryRow(ctx, `SELECT `+terminationCols+` FROM terminations
				WHERE sandbox_id = $1`, t.SandboxID))
			return mapErr("read termination of sandbox "+t.SandboxID, err)
		}
		if err != nil {
			return mapErr("record termination of sandbox "+t.SandboxID, err)
		}
		_, err = tx.Exec(ctx, `UPDATE agent_activity SET terminated_at = $1 WHERE sandbox_id = $2`, at, t.SandboxID)
		return mapErr("mark activity of sandbox "+t.SandboxID+" terminated", err)
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
	var out *store.Termination
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		t, err := scanTermination(tx.QueryRow(ctx, `UPDATE terminations SET transcript_id = $1,
			stop_error = $2, finished_at = $3 WHERE sandbox_id = $4 AND finished_at IS NULL RETURNING `+terminationCols,
			p.TranscriptID, p.StopError, orNow(p.At, s.clock()), p.SandboxID))
		if errors.Is(err, pgx.ErrNoRows) {
			var exists bool
			if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM terminations WHERE sandbox_id = $1)`, p.SandboxID).Scan(&exists); err != nil {
				return mapErr("finish termination of sandbox "+p.SandboxID, err)
			}
			if exists {
				return fmt.Errorf("termination of sandbox %s is finished already: %w", p.SandboxID, store.ErrConflict)
			}
			return fmt.Errorf("termination of sandbox %s: %w", p.SandboxID, store.ErrNotFound)
		}
		if err != nil {
			return mapErr("finish termination of sandbox "+p.SandboxID, err)
		}
		out = t
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
	rows, err := s.pool.Query(ctx, `SELECT `+terminationCols+` FROM terminations
		WHERE finished_at IS NULL AND at <= $1 ORDER BY at, sandbox_id COLLATE "C"`, claimedBefore)
	if err != nil {
		return nil, mapErr("list unfinished terminations", err)
	}
	return collect(rows, "terminations", scanTermination)
}

// GetTermination implements store.MonitorStore.
func (s *Store) GetTermination(ctx context.Context, sandboxID string) (*store.Termination, error) {
	t, err := scanTermination(s.pool.QueryRow(ctx, `SELECT `+terminationCols+` FROM terminations
		WHERE sandbox_id = $1`, sandboxID))
	if err != nil {
		return nil, mapErr("get termination of sandbox "+sandboxID, err)
	}
	return t, nil
}
