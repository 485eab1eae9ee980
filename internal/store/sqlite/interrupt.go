package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// The interrupt flag lives on the session row but, as a side channel, never
// bumps the version (see store.Session).

// SetInterruptFlag implements store.SessionStore.
func (s *Store) SetInterruptFlag(ctx context.Context, id, reason string) error {
	res, err := s.write.ExecContext(ctx, `UPDATE sessions SET interrupt_set = 1, interrupt_reason = ?,
		interrupt_at = ? WHERE id = ?`, reason, micros(s.timestamp()), id)
	return affectedOne(res, err, "set interrupt flag", id)
}

// CheckInterruptFlag reads and clears the flag in one IMMEDIATE
// transaction, so of N concurrent callers exactly one sees it set.
func (s *Store) CheckInterruptFlag(ctx context.Context, id string) (store.InterruptFlag, error) {
	var f store.InterruptFlag
	// A turn checks between every step and the flag is almost never set:
	// a read decides whether the write transaction is needed at all (the
	// transaction reads it again, so of racing callers still one sees it).
	var set bool
	err := s.read.QueryRowContext(ctx, `SELECT interrupt_set FROM sessions WHERE id = ?`, id).Scan(&set)
	if errors.Is(err, sql.ErrNoRows) {
		return f, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return f, fmt.Errorf("sqlite: check interrupt flag of %q: %w", id, err)
	}
	if !set {
		return f, nil
	}
	err = s.inTx(ctx, func(tx *wtx) error {
		var at sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT interrupt_set, interrupt_reason, interrupt_at FROM sessions
			WHERE id = ?`, id).Scan(&f.Set, &f.Reason, &at)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: check interrupt flag of %q: %w", id, err)
		}
		if !f.Set {
			f = store.InterruptFlag{}
			return nil
		}
		f.SetAt = timePtr(at)
		_, err = tx.ExecContext(ctx, `UPDATE sessions SET interrupt_set = 0, interrupt_reason = '',
			interrupt_at = NULL WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("sqlite: clear interrupt flag of %q: %w", id, err)
		}
		return nil
	})
	return f, err
}

// ClearInterruptFlag implements store.SessionStore.
func (s *Store) ClearInterruptFlag(ctx context.Context, id string) error {
	res, err := s.write.ExecContext(ctx, `UPDATE sessions SET interrupt_set = 0, interrupt_reason = '',
		interrupt_at = NULL WHERE id = ?`, id)
	return affectedOne(res, err, "clear interrupt flag", id)
}

// affectedOne maps an UPDATE of one session row: no row → ErrNotFound.
func affectedOne(res sql.Result, err error, op, id string) error {
	if err != nil {
		return fmt.Errorf("sqlite: %s of %q: %w", op, id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return nil
}
