package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// InsertRunRow implements store.ManagedStore. The primary key on session_id
// is the turn lock: of racing inserters exactly one gets the row. Zero
// StartedAt becomes now; UpdatedAt is StartedAt.
func (s *Store) InsertRunRow(ctx context.Context, r *store.RunRow) (*store.RunRow, error) {
	if r.Owner == "" {
		return nil, fmt.Errorf("run row of session %q: Owner is empty: %w", r.SessionID, store.ErrInvalid)
	}
	started := r.StartedAt
	if started.IsZero() {
		started = s.timestamp()
	}
	out, err := scanRunRow(s.write.QueryRowContext(ctx, `INSERT INTO run_rows
		(session_id, turn_seq, owner, lease_expires_at, recovering, recovery_attempts, last_progress_seq,
		 started_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (session_id) DO NOTHING RETURNING `+runRowCols,
		r.SessionID, r.TurnSeq, r.Owner, micros(r.LeaseExpiresAt), r.Recovering, r.RecoveryAttempts,
		r.LastProgressSeq, micros(started), micros(started)))
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
	r, err := scanRunRow(s.read.QueryRowContext(ctx, `SELECT `+runRowCols+` FROM run_rows WHERE session_id = ?`, sessionID))
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
		row, err := scanRunRow(tx.QueryRowContext(ctx, `UPDATE run_rows SET
			owner = ?, lease_expires_at = ?, recovering = ?, recovery_attempts = ?, last_progress_seq = ?,
			updated_at = ? WHERE session_id = ? AND owner = ? RETURNING `+runRowCols,
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
	err := tx.QueryRowContext(ctx, `SELECT owner FROM run_rows WHERE session_id = ?`, sessionID).Scan(&owner)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("run row of session %q: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: read run row of session %q: %w", sessionID, err)
	}
	return fmt.Errorf("run row of session %q is owned by %q, not %q: %w", sessionID, owner, expectedOwner, store.ErrConflict)
}

// DeleteRunRow implements store.ManagedStore.
func (s *Store) DeleteRunRow(ctx context.Context, sessionID, owner string) error {
	return s.inTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM run_rows WHERE session_id = ? AND owner = ?`, sessionID, owner)
		if err != nil {
			return fmt.Errorf("sqlite: delete run row of session %q: %w", sessionID, err)
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return nil
		}
		return runRowMiss(ctx, tx, sessionID, owner)
	})
}

// ListRunRows implements store.ManagedStore: every tenant's, by session id.
func (s *Store) ListRunRows(ctx context.Context) ([]*store.RunRow, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+runRowCols+` FROM run_rows ORDER BY session_id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list run rows: %w", err)
	}
	return collect(rows, "run rows", scanRunRow)
}
