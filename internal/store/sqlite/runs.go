package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const runCols = `id, session_id, seq, status, start_sequence, error, metadata, created_at, updated_at, completed_at,
	usage, checkpoint_id`

func scanRun(r scanner) (*store.Run, error) {
	var (
		run              store.Run
		status           string
		metadata         sql.NullString
		created, updated int64
		completed        sql.NullInt64
		usage            sql.NullString
	)
	if err := r.Scan(&run.ID, &run.SessionID, &run.Seq, &status, &run.StartSequence, &run.Error,
		&metadata, &created, &updated, &completed, &usage, &run.CheckpointID); err != nil {
		return nil, err
	}
	run.Status = store.RunStatus(status)
	run.Metadata, run.Usage = rawOrNil(metadata), rawOrNil(usage)
	run.CreatedAt, run.UpdatedAt = fromMicros(created), fromMicros(updated)
	run.CompletedAt = timePtr(completed)
	return &run, nil
}

// CreateRun implements store.RunStore. Runs do not bump the session version:
// they record turns, not session state.
func (s *Store) CreateRun(ctx context.Context, p store.CreateRunParams) (*store.Run, error) {
	if p.ID == "" {
		p.ID = ids.New("run")
	}
	meta, err := jsonValue("run metadata", p.Metadata)
	if err != nil {
		return nil, err
	}
	var run *store.Run
	err = s.inTx(ctx, func(tx *wtx) error {
		if err := requireSession(ctx, tx, p.SessionID); err != nil {
			return err
		}
		now := micros(s.timestamp())
		row := tx.QueryRowContext(ctx, `INSERT INTO runs (id, session_id, seq, status, start_sequence, metadata,
			created_at, updated_at)
			VALUES (?, ?, (SELECT COALESCE(MAX(seq), 0) + 1 FROM runs WHERE session_id = ?), ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING RETURNING `+runCols,
			p.ID, p.SessionID, p.SessionID, string(store.RunRunning), p.StartSequence, meta, now, now)
		var err error
		run, err = scanRun(row)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("run %q: %w", p.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: create run %q: %w", p.ID, err)
		}
		return nil
	})
	return run, err
}

// UpdateRunStatus implements store.RunStore. Reaching completed, failed or
// interrupted stamps CompletedAt; any other status clears it.
func (s *Store) UpdateRunStatus(ctx context.Context, p store.UpdateRunStatusParams) (*store.Run, error) {
	if !p.Status.Valid() {
		return nil, fmt.Errorf("status %q is not a run status: %w", p.Status, store.ErrInvalid)
	}
	now := s.timestamp()
	var completed sql.NullInt64
	switch p.Status {
	case store.RunCompleted, store.RunFailed, store.RunInterrupted:
		completed = nullMicros(&now)
	}
	run, err := scanRun(s.write.QueryRowContext(ctx, `UPDATE runs SET status = ?, error = ?, updated_at = ?,
		completed_at = ? WHERE id = ? RETURNING `+runCols,
		string(p.Status), p.Error, micros(now), completed, p.RunID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %q: %w", p.RunID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: update run %q: %w", p.RunID, err)
	}
	return run, nil
}

// GetCurrentRun implements store.RunStore.
func (s *Store) GetCurrentRun(ctx context.Context, sessionID string) (*store.Run, error) {
	run, err := scanRun(s.read.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs WHERE session_id = ?
		ORDER BY seq DESC LIMIT 1`, sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		if err := requireSession(ctx, s.read, sessionID); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("session %q has no run: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: current run of %q: %w", sessionID, err)
	}
	return run, nil
}

// ListRuns implements store.RunStore.
func (s *Store) ListRuns(ctx context.Context, sessionID string) ([]*store.Run, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+runCols+` FROM runs WHERE session_id = ? ORDER BY seq`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list runs of %q: %w", sessionID, err)
	}
	defer rows.Close()
	var out []*store.Run
	for rows.Next() {
		run, err := scanRun(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan run: %w", err)
		}
		out = append(out, run)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list runs of %q: %w", sessionID, err)
	}
	if len(out) == 0 {
		return nil, requireSession(ctx, s.read, sessionID)
	}
	return out, nil
}

// GetRun implements store.RunStore.
func (s *Store) GetRun(ctx context.Context, runID string) (*store.Run, error) {
	run, err := scanRun(s.read.QueryRowContext(ctx, `SELECT `+runCols+` FROM runs WHERE id = ?`, runID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run %q: %w", runID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get run %q: %w", runID, err)
	}
	return run, nil
}
