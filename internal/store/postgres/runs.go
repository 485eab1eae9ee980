package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const runCols = `id, session_id, seq, status, start_sequence, error, metadata, created_at, updated_at, completed_at,
	usage, checkpoint_id`

func scanRun(row pgx.Row) (*store.Run, error) {
	var (
		r        store.Run
		status   string
		metadata []byte
		usage    []byte
	)
	if err := row.Scan(&r.ID, &r.SessionID, &r.Seq, &status, &r.StartSequence, &r.Error, &metadata,
		&r.CreatedAt, &r.UpdatedAt, &r.CompletedAt, &usage, &r.CheckpointID); err != nil {
		return nil, err
	}
	r.Status = store.RunStatus(status)
	r.Metadata, r.Usage = rawOrNil(metadata), rawOrNil(usage)
	r.CreatedAt, r.UpdatedAt, r.CompletedAt = r.CreatedAt.UTC(), r.UpdatedAt.UTC(), utcPtr(r.CompletedAt)
	return &r, nil
}

// CreateRun writes a running run. Seq comes from the session's run_count,
// advanced under the row lock in the same statement, so it is dense. Runs
// are not a modification of the session state: the version does not move.
func (s *Store) CreateRun(ctx context.Context, p store.CreateRunParams) (*store.Run, error) {
	if p.ID == "" {
		p.ID = ids.New("run")
	}
	op := fmt.Sprintf("session %s: create run %s", p.SessionID, p.ID)
	metadata, err := jsonArg("Metadata", p.Metadata)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", op, err)
	}
	r, err := scanRun(s.pool.QueryRow(ctx, `WITH s AS (
			UPDATE sessions SET run_count = run_count + 1 WHERE id = $2 RETURNING run_count)
		INSERT INTO runs (id, session_id, seq, status, start_sequence, metadata, created_at, updated_at)
		SELECT $1, $2, s.run_count, $3, $4, $5, $6, $6 FROM s
		RETURNING `+runCols,
		p.ID, p.SessionID, string(store.RunRunning), p.StartSequence, metadata, s.clock()))
	if err != nil {
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("%s: %w", op, store.ErrAlreadyExists)
		}
		return nil, mapErr(op, err)
	}
	return r, nil
}

// terminal run statuses set CompletedAt; suspensions do not, they resume.
func terminal(st store.RunStatus) bool {
	return st == store.RunCompleted || st == store.RunFailed || st == store.RunInterrupted
}

// UpdateRunStatus moves a run to a new status.
func (s *Store) UpdateRunStatus(ctx context.Context, p store.UpdateRunStatusParams) (*store.Run, error) {
	op := fmt.Sprintf("update run %s", p.RunID)
	if !p.Status.Valid() {
		return nil, fmt.Errorf("%s: %q is not a run status: %w", op, p.Status, store.ErrInvalid)
	}
	now := s.clock()
	var completed any
	if terminal(p.Status) {
		completed = now
	}
	r, err := scanRun(s.pool.QueryRow(ctx, `UPDATE runs SET status = $2, error = $3, updated_at = $4,
		completed_at = $5 WHERE id = $1 RETURNING `+runCols, p.RunID, string(p.Status), p.Error, now, completed))
	if err != nil {
		return nil, mapErr(op, err)
	}
	return r, nil
}

// GetCurrentRun returns the session's most recently created run.
func (s *Store) GetCurrentRun(ctx context.Context, sessionID string) (*store.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, "SELECT "+runCols+
		" FROM runs WHERE session_id = $1 ORDER BY seq DESC LIMIT 1", sessionID))
	if errors.Is(err, pgx.ErrNoRows) {
		if err := requireSession(ctx, s.pool, sessionID); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, mapErr(fmt.Sprintf("session %s: current run", sessionID), err)
	}
	return r, nil
}

// ListRuns returns the session's runs in creation order.
func (s *Store) ListRuns(ctx context.Context, sessionID string) ([]*store.Run, error) {
	op := fmt.Sprintf("session %s: list runs", sessionID)
	rows, err := s.pool.Query(ctx, "SELECT "+runCols+" FROM runs WHERE session_id = $1 ORDER BY seq", sessionID)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Run, error) { return scanRun(row) })
	if err != nil {
		return nil, mapErr(op, err)
	}
	if len(out) == 0 {
		return nil, requireSession(ctx, s.pool, sessionID)
	}
	return out, nil
}

// GetRun returns one run by id.
func (s *Store) GetRun(ctx context.Context, runID string) (*store.Run, error) {
	r, err := scanRun(s.pool.QueryRow(ctx, "SELECT "+runCols+" FROM runs WHERE id = $1", runID))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("run %s", runID), err)
	}
	return r, nil
}
