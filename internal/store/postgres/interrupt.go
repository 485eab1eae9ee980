package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// The interrupt flag lives on the session row but is a side channel: none
// of these statements touch version, so a runtime polling its flag never
// invalidates its own expectedVersion.

// SetInterruptFlag durably requests an interrupt.
func (s *Store) SetInterruptFlag(ctx context.Context, id, reason string) error {
	tag, err := s.pool.Exec(ctx, `UPDATE sessions SET interrupt_set = true, interrupt_reason = $2,
		interrupt_set_at = $3 WHERE id = $1`, id, reason, s.clock())
	if err != nil {
		return mapErr(fmt.Sprintf("session %s: set interrupt flag", id), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("session %s: set interrupt flag: %w", id, store.ErrNotFound)
	}
	return nil
}

// CheckInterruptFlag reads and clears the flag in one UPDATE. Concurrent
// callers queue on the row lock and re-check "AND interrupt_set" against the
// row as the winner left it, so exactly one of them sees Set == true.
func (s *Store) CheckInterruptFlag(ctx context.Context, id string) (store.InterruptFlag, error) {
	op := fmt.Sprintf("session %s: check interrupt flag", id)
	f := store.InterruptFlag{Set: true}
	// The reason and time stay in the row after clearing; RETURNING reads them
	// as they were set, and they are only reported while the flag is set.
	err := s.pool.QueryRow(ctx, `UPDATE sessions SET interrupt_set = false
		WHERE id = $1 AND interrupt_set RETURNING interrupt_reason, interrupt_set_at`, id).Scan(&f.Reason, &f.SetAt)
	if err == nil {
		f.SetAt = utcPtr(f.SetAt)
		return f, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return store.InterruptFlag{}, mapErr(op, err)
	}
	ok, err := s.SessionExists(ctx, id)
	if err != nil {
		return store.InterruptFlag{}, err
	}
	if !ok {
		return store.InterruptFlag{}, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return store.InterruptFlag{}, nil
}

// ClearInterruptFlag clears the flag without reading it.
func (s *Store) ClearInterruptFlag(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, "UPDATE sessions SET interrupt_set = false WHERE id = $1", id)
	if err != nil {
		return mapErr(fmt.Sprintf("session %s: clear interrupt flag", id), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("session %s: clear interrupt flag: %w", id, store.ErrNotFound)
	}
	return nil
}
