package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"

	"github.com/agentkernel/agentkernel/internal/store"
)

// UpdateStatus implements store.SessionStore (no CAS).
func (s *Store) UpdateStatus(ctx context.Context, p store.UpdateStatusParams) (int64, error) {
	if !p.Status.Valid() {
		return 0, fmt.Errorf("status %q is not a session status: %w", p.Status, store.ErrInvalid)
	}
	ictx, err := jsonValue("interrupt context", p.InterruptContext)
	if err != nil {
		return 0, err
	}
	var version int64
	err = s.write.QueryRowContext(ctx, `UPDATE sessions SET status = ?,
		error = COALESCE(?, error), interrupt_context = COALESCE(?, interrupt_context),
		version = version + 1, updated_at = ? WHERE id = ? RETURNING version`,
		string(p.Status), nullString(p.Error), ictx, micros(s.timestamp()), p.SessionID).Scan(&version)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("session %q: %w", p.SessionID, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: update status of %q: %w", p.SessionID, err)
	}
	return version, nil
}

// CompareAndSetStatus implements store.SessionStore. The read and the
// conditional write share one IMMEDIATE transaction, so no other writer can
// slip between them: exactly one caller wins per version.
func (s *Store) CompareAndSetStatus(ctx context.Context, p store.CompareAndSetStatusParams) (store.CASResult, error) {
	if len(p.Expected) == 0 {
		return store.CASResult{}, fmt.Errorf("expected statuses are required: %w", store.ErrInvalid)
	}
	if !p.New.Valid() {
		return store.CASResult{}, fmt.Errorf("status %q is not a session status: %w", p.New, store.ErrInvalid)
	}
	ictx, err := jsonValue("interrupt context", p.InterruptContext)
	if err != nil {
		return store.CASResult{}, err
	}
	var res store.CASResult
	err = s.inTx(ctx, func(tx *wtx) error {
		var status string
		var version int64
		err := tx.QueryRowContext(ctx, `SELECT status, version FROM sessions WHERE id = ?`, p.SessionID).
			Scan(&status, &version)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session %q: %w", p.SessionID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read status of %q: %w", p.SessionID, err)
		}
		res = store.CASResult{CurrentStatus: store.SessionStatus(status), CurrentVersion: version}
		if !slices.Contains(p.Expected, res.CurrentStatus) || (p.ExpectedVersion != nil && *p.ExpectedVersion != version) {
			return nil
		}
		err = tx.QueryRowContext(ctx, `UPDATE sessions SET status = ?,
			error = COALESCE(?, error), interrupt_context = COALESCE(?, interrupt_context),
			version = version + 1, updated_at = ? WHERE id = ? RETURNING version`,
			string(p.New), nullString(p.Error), ictx, micros(s.timestamp()), p.SessionID).Scan(&res.NewVersion)
		if err != nil {
			return fmt.Errorf("sqlite: set status of %q: %w", p.SessionID, err)
		}
		res.OK, res.CurrentStatus, res.CurrentVersion = true, p.New, res.NewVersion
		return nil
	})
	if err != nil {
		return store.CASResult{}, err
	}
	return res, nil
}

func nullString(p *string) sql.NullString {
	if p == nil {
		return sql.NullString{}
	}
	return sql.NullString{String: *p, Valid: true}
}
