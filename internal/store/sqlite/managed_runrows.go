package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// The run row of seed 000 is the session's running run with an owner: a
// row of runs (one per turn, kept when the turn ends) whose status is
// running. The unique index runs_live (session, while running and owned)
// is the turn lock.

// liveRun selects a session's run row.
const liveRun = ` FROM runs WHERE session_id = ? AND status = 'running' AND owner <> ''`

// InsertRunRow implements store.ManagedStore: it creates the turn's run
// (RunID, or a new id) in status running, in one statement. Of racing
// inserters exactly one gets it. Zero StartedAt becomes now; UpdatedAt is
// StartedAt.
func (s *Store) InsertRunRow(ctx context.Context, r *store.RunRow) (*store.RunRow, error) {
	if r.Owner == "" {
		return nil, fmt.Errorf("run row of session %q: Owner is empty: %w", r.SessionID, store.ErrInvalid)
	}
	id := r.RunID
	if id == "" {
		id = ids.New("run")
	}
	started := r.StartedAt
	if started.IsZero() {
		started = s.timestamp()
	}
	out, err := scanRunRow(s.write.QueryRowContext(ctx, `INSERT INTO runs
		(id, session_id, seq, status, start_sequence, turn_seq, owner, lease_expires_at, recovering,
		 recovery_attempts, last_progress_seq, created_at, updated_at)
		VALUES (?1, ?2, (SELECT COALESCE(MAX(seq), 0) + 1 FROM runs WHERE session_id = ?2), 'running', ?3, ?3,
		        ?4, ?5, ?6, ?7, ?8, ?9, ?9)
		ON CONFLICT DO NOTHING RETURNING `+runRowCols,
		id, r.SessionID, r.TurnSeq, r.Owner, micros(r.LeaseExpiresAt), r.Recovering, r.RecoveryAttempts,
		r.LastProgressSeq, micros(started)))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("session %q already has a run row: %w", r.SessionID, store.ErrAlreadyExists)
	case s.drv.isForeignKey(err):
		return nil, fmt.Errorf("session %q: %w", r.SessionID, store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("sqlite: insert run row of session %q: %w", r.SessionID, err)
	}
	return out, nil
}

// GetRunRow implements store.ManagedStore.
func (s *Store) GetRunRow(ctx context.Context, sessionID string) (*store.RunRow, error) {
	r, err := scanRunRow(s.read.QueryRowContext(ctx, `SELECT `+runRowCols+liveRun, sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("run row of session %q: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get run row of session %q: %w", sessionID, err)
	}
	return r, nil
}

// UpdateRunRow implements store.ManagedStore: a compare-and-set on Owner.
// TurnSeq and StartedAt belong to the turn and are not rewritten.
func (s *Store) UpdateRunRow(ctx context.Context, r *store.RunRow, expectedOwner string) (*store.RunRow, error) {
	if r.Owner == "" {
		return nil, fmt.Errorf("run row of session %q: Owner is empty: %w", r.SessionID, store.ErrInvalid)
	}
	var out *store.RunRow
	err := s.inTx(ctx, func(tx *wtx) error {
		row, err := scanRunRow(tx.QueryRowContext(ctx, `UPDATE runs SET
			owner = ?, lease_expires_at = ?, recovering = ?, recovery_attempts = ?, last_progress_seq = ?,
			updated_at = ? WHERE session_id = ? AND status = 'running' AND owner = ? AND owner <> ''
			RETURNING `+runRowCols,
			r.Owner, micros(r.LeaseExpiresAt), r.Recovering, r.RecoveryAttempts, r.LastProgressSeq,
			micros(s.timestamp()), r.SessionID, expectedOwner))
		if err == nil {
			out = row
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: update run row of session %q: %w", r.SessionID, err)
		}
		return runRowMiss(ctx, tx, r.SessionID, expectedOwner)
	})
	return out, err
}

// runRowMiss tells why a write conditioned on (session, owner) matched
// nothing: no run row, or another owner's.
func runRowMiss(ctx context.Context, tx *wtx, sessionID, expectedOwner string) error {
	var owner string
	err := tx.QueryRowContext(ctx, `SELECT owner`+liveRun, sessionID).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("run row of session %q: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: read run row of session %q: %w", sessionID, err)
	}
	return fmt.Errorf("run row of session %q is owned by %q, not %q: %w", sessionID, owner, expectedOwner, store.ErrConflict)
}

// DeleteRunRow implements store.ManagedStore: the run stops running (its
// record stays, failed) and its time joins the session's active time.
func (s *Store) DeleteRunRow(ctx context.Context, sessionID, owner string) error {
	return s.inTx(ctx, func(tx *wtx) error {
		_, took, err := s.closeRunTx(ctx, tx, sessionID, owner, store.RunFailed, "the turn ended without its closing write", sql.NullString{}, "")
		if err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE sessions SET active_us = active_us + ? WHERE id = ?`, took, sessionID); err != nil {
			return fmt.Errorf("sqlite: active time of session %q: %w", sessionID, err)
		}
		return nil
	})
}

// closeRunTx ends the session's running run owned by owner: status,
// error, usage and checkpoint on the run. It returns the run's id and how
// long it ran (µs), which the caller adds to the session's active time.
func (s *Store) closeRunTx(ctx context.Context, tx *wtx, sessionID, owner string, status store.RunStatus, errText string, usage sql.NullString, checkpoint string) (string, int64, error) {
	now := micros(s.timestamp())
	var id string
	var started int64
	err := tx.QueryRowContext(ctx, `UPDATE runs SET status = ?, error = ?, usage = ?, checkpoint_id = ?,
		completed_at = ?, updated_at = ?
		WHERE session_id = ? AND status = 'running' AND owner = ? AND owner <> '' RETURNING id, created_at`,
		string(status), errText, usage, checkpoint, now, now, sessionID, owner).Scan(&id, &started)
	if errors.Is(err, sql.ErrNoRows) {
		return "", 0, runRowMiss(ctx, tx, sessionID, owner)
	}
	if err != nil {
		return "", 0, fmt.Errorf("sqlite: end run of session %q: %w", sessionID, err)
	}
	return id, max(0, now-started), nil
}

// ListRunRows implements store.ManagedStore: every tenant's, by session id.
func (s *Store) ListRunRows(ctx context.Context) ([]*store.RunRow, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+runRowCols+` FROM runs
		WHERE status = 'running' AND owner <> '' ORDER BY session_id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list run rows: %w", err)
	}
	return collect(rows, "run rows", scanRunRow)
}

// ClaimRunRows implements store.ManagedStore: one UPDATE for every row
// (the single writer makes the owner check and the write one step).
func (s *Store) ClaimRunRows(ctx context.Context, c store.RunRowClaim) ([]*store.RunRow, error) {
	if c.Owner == "" || c.From == "" {
		return nil, fmt.Errorf("claim run rows: Owner and From must be set: %w", store.ErrInvalid)
	}
	if len(c.SessionIDs) == 0 {
		return []*store.RunRow{}, nil
	}
	sessions, err := json.Marshal(c.SessionIDs)
	if err != nil {
		return nil, err
	}
	types, err := json.Marshal(append([]string{}, c.ProgressTypes...))
	if err != nil {
		return nil, err
	}
	rows, err := s.write.QueryContext(ctx, `UPDATE runs SET owner = ?1, lease_expires_at = ?2, recovering = 1,
		recovery_attempts = CASE WHEN EXISTS (SELECT 1 FROM messages m WHERE m.session_id = runs.session_id
			AND m.seq > runs.last_progress_seq AND m.role IN (SELECT value FROM json_each(?3)))
			THEN 1 ELSE recovery_attempts + 1 END,
		last_progress_seq = (SELECT COALESCE(MAX(m.seq), 0) FROM messages m WHERE m.session_id = runs.session_id),
		updated_at = ?4
		WHERE session_id IN (SELECT value FROM json_each(?5)) AND status = 'running' AND owner = ?6 AND owner <> ''
		RETURNING `+runRowCols,
		c.Owner, micros(c.Lease), string(types), micros(s.timestamp()), string(sessions), c.From)
	if err != nil {
		return nil, fmt.Errorf("sqlite: claim run rows: %w", err)
	}
	return collect(rows, "claimed run rows", scanRunRow)
}
