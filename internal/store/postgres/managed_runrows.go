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

// The run row of seed 000 is the session's running run with an owner: a
// row of runs (one per turn, kept when the turn ends) whose status is
// running. The unique index runs_live_idx (session, while running and
// owned) is the turn lock.

// liveRun selects a session's run row.
const liveRun = ` FROM runs WHERE session_id = $1 AND status = 'running' AND owner <> ''`

// InsertRunRow creates the turn's run (RunID, or a new id) in status
// running. Inserters of one session queue on its row lock (taken by the
// run_count update), then find the live run of the winner: exactly one
// gets the row. Zero StartedAt becomes now; UpdatedAt is StartedAt.
func (s *Store) InsertRunRow(ctx context.Context, r *store.RunRow) (*store.RunRow, error) {
	if r.Owner == "" {
		return nil, fmt.Errorf("run row of session %s: Owner is empty: %w", r.SessionID, store.ErrInvalid)
	}
	id := r.RunID
	if id == "" {
		id = ids.New("run")
	}
	started := r.StartedAt
	if started.IsZero() {
		started = s.clock()
	}
	var out *store.RunRow
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var seq int64
		err := tx.QueryRow(ctx, `UPDATE sessions SET run_count = run_count + 1 WHERE id = $1 AND kind = 'managed'
			RETURNING run_count`, r.SessionID).Scan(&seq)
		if err != nil {
			return mapErr("insert run row: session "+r.SessionID, err)
		}
		var busy bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1`+liveRun+`)`, r.SessionID).Scan(&busy); err != nil {
			return mapErr("insert run row of session "+r.SessionID, err)
		}
		if busy {
			return fmt.Errorf("session %s already has a run row: %w", r.SessionID, store.ErrAlreadyExists)
		}
		out, err = scanRunRow(tx.QueryRow(ctx, `INSERT INTO runs
			(id, session_id, seq, status, start_sequence, turn_seq, owner, lease_expires_at, recovering,
			 recovery_attempts, last_progress_seq, created_at, updated_at)
			VALUES ($1, $2, $3, 'running', $4, $4, $5, $6, $7, $8, $9, $10, $10) RETURNING `+runRowCols,
			id, r.SessionID, seq, r.TurnSeq, r.Owner, r.LeaseExpiresAt, r.Recovering, r.RecoveryAttempts,
			r.LastProgressSeq, started))
		if isUniqueViolation(err) {
			return fmt.Errorf("session %s already has a run row (or run %s exists): %w", r.SessionID, id, store.ErrAlreadyExists)
		}
		if err != nil {
			return mapErr("insert run row of session "+r.SessionID, err)
		}
		return nil
	})
	return out, err
}

// GetRunRow returns the session's run row or ErrNotFound.
func (s *Store) GetRunRow(ctx context.Context, sessionID string) (*store.RunRow, error) {
	r, err := scanRunRow(s.pool.QueryRow(ctx, `SELECT `+runRowCols+liveRun, sessionID))
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
	out, err := scanRunRow(s.pool.QueryRow(ctx, `UPDATE runs SET
		owner = $3, lease_expires_at = $4, recovering = $5, recovery_attempts = $6, last_progress_seq = $7,
		updated_at = $8 WHERE session_id = $1 AND status = 'running' AND owner = $2 AND owner <> ''
		RETURNING `+runRowCols,
		r.SessionID, expectedOwner, r.Owner, r.LeaseExpiresAt, r.Recovering, r.RecoveryAttempts,
		r.LastProgressSeq, s.clock()))
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapErr("update run row of session "+r.SessionID, err)
	}
	return nil, runRowMiss(ctx, s.pool, r.SessionID, expectedOwner)
}

// runRowMiss tells why a write conditioned on (session, owner) matched
// nothing: no run row, or another owner's.
func runRowMiss(ctx context.Context, q querier, sessionID, expectedOwner string) error {
	var owner string
	err := q.QueryRow(ctx, `SELECT owner`+liveRun, sessionID).Scan(&owner)
	if err != nil {
		return mapErr("run row of session "+sessionID, err)
	}
	return fmt.Errorf("run row of session %s is owned by %q, not %q: %w", sessionID, owner, expectedOwner, store.ErrConflict)
}

// DeleteRunRow ends the session's running run if owner holds it: the run
// stops running (its record stays, failed) and its time joins the
// session's active time.
func (s *Store) DeleteRunRow(ctx context.Context, sessionID, owner string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		_, took, err := s.closeRunTx(ctx, tx, sessionID, owner, store.RunFailed, "the turn ended without its closing write", nil, "")
		if err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `UPDATE sessions SET active_us = active_us + $2 WHERE id = $1`, sessionID, took)
		return mapErr("active time of session "+sessionID, err)
	})
}

// closeRunTx ends the session's running run owned by owner: status,
// error, usage and checkpoint on the run. It returns the run's id and how
// long it ran (µs), which the caller adds to the session's active time.
func (s *Store) closeRunTx(ctx context.Context, tx pgx.Tx, sessionID, owner string, status store.RunStatus, errText string, usage any, checkpoint string) (string, int64, error) {
	now := s.clock()
	var (
		id      string
		started time.Time
	)
	err := tx.QueryRow(ctx, `UPDATE runs SET status = $3, error = $4, usage = $5, checkpoint_id = $6,
		completed_at = $7, updated_at = $7
		WHERE session_id = $1 AND status = 'running' AND owner = $2 AND owner <> '' RETURNING id, created_at`,
		sessionID, owner, string(status), errText, usage, checkpoint, now).Scan(&id, &started)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0, runRowMiss(ctx, tx, sessionID, owner)
	}
	if err != nil {
		return "", 0, mapErr("end run of session "+sessionID, err)
	}
	return id, max(0, now.Sub(started).Microseconds()), nil
}

// ListRunRows lists every tenant's run rows by session id.
func (s *Store) ListRunRows(ctx context.Context) ([]*store.RunRow, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+runRowCols+` FROM runs
		WHERE status = 'running' AND owner <> '' ORDER BY session_id COLLATE "C"`)
	if err != nil {
		return nil, mapErr("list run rows", err)
	}
	return collect(rows, "run rows", scanRunRow)
}

// ClaimRunRows implements store.ManagedStore. The rows are locked in
// session order first (FOR UPDATE re-checks the owner of a row another
// claimer just wrote, so it is skipped), so claimers of overlapping sets
// never deadlock; then they are written in the same statement.
func (s *Store) ClaimRunRows(ctx context.Context, c store.RunRowClaim) ([]*store.RunRow, error) {
	if c.Owner == "" || c.From == "" {
		return nil, fmt.Errorf("claim run rows: Owner and From must be set: %w", store.ErrInvalid)
	}
	if len(c.SessionIDs) == 0 {
		return []*store.RunRow{}, nil
	}
	types := append([]string{}, c.ProgressTypes...)
	rows, err := s.pool.Query(ctx, `WITH claimed AS (
			SELECT id FROM runs WHERE session_id = ANY($1) AND status = 'running' AND owner = $2 AND owner <> ''
			ORDER BY session_id COLLATE "C" FOR UPDATE)
		UPDATE runs SET owner = $3, lease_expires_at = $4, recovering = true,
			recovery_attempts = CASE WHEN EXISTS (SELECT 1 FROM messages m WHERE m.session_id = runs.session_id
				AND m.seq > runs.last_progress_seq AND m.role = ANY($5)) THEN 1 ELSE runs.recovery_attempts + 1 END,
			last_progress_seq = (SELECT COALESCE(MAX(m.seq), 0) FROM messages m WHERE m.session_id = runs.session_id),
			updated_at = $6
		FROM claimed WHERE runs.id = claimed.id
		RETURNING runs.session_id, runs.id, runs.turn_seq, runs.owner, runs.lease_expires_at, runs.recovering,
			runs.recovery_attempts, runs.last_progress_seq, runs.created_at, runs.updated_at`,
		c.SessionIDs, c.From, c.Owner, c.Lease, types, s.clock())
	if err != nil {
		return nil, mapErr("claim run rows", err)
	}
	return collect(rows, "claimed run rows", scanRunRow)
}
