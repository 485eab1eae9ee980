package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// InsertRunRow creates the session's run row. The primary key on
// session_id is the turn lock: of racing inserters exactly one gets the
// row (ON CONFLICT waits for an in-flight insert, then does nothing). Zero
// StartedAt becomes now; UpdatedAt is StartedAt.
func (s *Store) InsertRunRow(ctx context.Context, r *store.RunRow) (*store.RunRow, error) {
	if r.Owner == "" {
		return nil, fmt.Errorf("run row of session %s: Owner is empty: %w", r.SessionID, store.ErrInvalid)
	}
	started := r.StartedAt
	if started.IsZero() {
		started = s.clock()
	}
	out, err := scanRunRow(s.pool.QueryRow(ctx, `INSERT INTO run_rows
		(session_id, turn_seq, owner, lease_expires_at, recovering, recovery_attempts, last_progress_seq,
		 started_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $8)
		ON CONFLICT (session_id) DO NOTHING RETURNING `+runRowCols,
		r.SessionID, r.TurnSeq, r.Owner, r.LeaseExpiresAt, r.Recovering, r.RecoveryAttempts,
		r.LastProgressSeq, started))
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, fmt.Errorf("session %s already has a run row: %w", r.SessionID, store.ErrAlreadyExists)
	case pgCode(err) == codeForeignKeyViolation:
		return nil, fmt.Errorf("insert run row: session %s: %w", r.SessionID, store.ErrNotFound)
	case err != nil:
		return nil, mapErr("insert run row of session "+r.SessionID, err)
	}
	return out, nil
}

// GetRunRow returns the session's run row or ErrNotFound.
func (s *Store) GetRunRow(ctx context.Context, sessionID string) (*store.RunRow, error) {
	r, err := scanRunRow(s.pool.QueryRow(ctx, `SELECT `+runRowCols+` FROM run_rows WHERE session_id = $1`, sessionID))
	if err != nil {
		return nil, mapErr("run row of session "+sessionID, err)
	}
	return r, nil
}

// UpdateRunRow is a compare-and-set on Owner: a racing writer waits for the
// row lock and re-checks the owner against the committed row, so after a
// takeover the old owner's writes fail. TurnSeq and StartedAt belong to the
// turn and are not rewritten.
func (s *Store) UpdateRunRow(ctx context.Context, r *store.RunRow, expectedOwner string) (*store.RunRow, error) {
	if r.Owner == "" {
		return nil, fmt.Errorf("run row of session %s: Owner is empty: %w", r.SessionID, store.ErrInvalid)
	}
	out, err := scanRunRow(s.pool.QueryRow(ctx, `UPDATE run_rows SET
		owner = $3, lease_expires_at = $4, recovering = $5, recovery_attempts = $6, last_progress_seq = $7,
		updated_at = $8 WHERE session_id = $1 AND owner = $2 RETURNING `+runRowCols,
		r.SessionID, expectedOwner, r.Owner, r.LeaseExpiresAt, r.Recovering, r.RecoveryAttempts,
		r.LastProgressSeq, s.clock()))
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapErr("update run row of session "+r.SessionID, err)
	}
	return nil, s.runRowMiss(ctx, r.SessionID, expectedOwner)
}

// runRowMiss tells why a write conditioned on (session, owner) matched
// nothing: no run row, or another owner's.
func (s *Store) runRowMiss(ctx context.Context, sessionID, expectedOwner string) error {
	var owner string
	err := s.pool.QueryRow(ctx, `SELECT owner FROM run_rows WHERE session_id = $1`, sessionID).Scan(&owner)
	if err != nil {
		return mapErr("run row of session "+sessionID, err)
	}
	return fmt.Errorf("run row of session %s is owned by %q, not %q: %w", sessionID, owner, expectedOwner, store.ErrConflict)
}

// DeleteRunRow deletes the row if owner holds it.
func (s *Store) DeleteRunRow(ctx context.Context, sessionID, owner string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM run_rows WHERE session_id = $1 AND owner = $2`, sessionID, owner)
	if err != nil {
		return mapErr("delete run row of session "+sessionID, err)
	}
	if tag.RowsAffected() > 0 {
		return nil
	}
	return s.runRowMiss(ctx, sessionID, owner)
}

// ListRunRows lists every tenant's run rows by session id.
func (s *Store) ListRunRows(ctx context.Context) ([]*store.RunRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runRowCols+` FROM run_rows ORDER BY session_id`)
	if err != nil {
		return nil, mapErr("list run rows", err)
	}
	return collect(rows, "run rows", scanRunRow)
}
