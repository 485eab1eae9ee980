package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Postgres SQLSTATE codes the engine maps or retries.
const (
	codeUniqueViolation      = "23505"
	codeForeignKeyViolation  = "23503"
	codeInvalidText          = "22P02"
	codeSerializationFailure = "40001"
	codeDeadlockDetected     = "40P01"
)

func pgCode(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return pgErr.Code
	}
	return ""
}

func isUniqueViolation(err error) bool { return pgCode(err) == codeUniqueViolation }

// mapErr turns a native error into a store sentinel wrapped with what the
// caller was doing. Errors already carrying a sentinel pass through.
func mapErr(op string, err error) error {
	if err == nil {
		return nil
	}
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, store.ErrAlreadyExists),
		errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrVersionMismatch),
		errors.Is(err, store.ErrInvalid), errors.Is(err, store.ErrFenced), errors.Is(err, store.ErrLeaseHeld):
		return err
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	switch pgCode(err) {
	case codeUniqueViolation:
		return fmt.Errorf("%s: %w: %w", op, store.ErrConflict, err)
	case codeForeignKeyViolation:
		return fmt.Errorf("%s: referenced row does not exist: %w: %w", op, store.ErrNotFound, err)
	case codeInvalidText:
		return fmt.Errorf("%s: %w: %w", op, store.ErrInvalid, err)
	}
	return fmt.Errorf("%s: %w", op, err)
}

// retryable reports errors after which the whole transaction can be run
// again: Postgres rolled it back and nothing was written.
func retryable(err error) bool {
	switch pgCode(err) {
	case codeSerializationFailure, codeDeadlockDetected:
		return true
	}
	return false
}

const maxTxAttempts = 5

// inTx runs fn in a READ COMMITTED transaction and commits it. Races are
// settled by the row locks fn takes on the session row (SELECT … FOR NO KEY
// UPDATE, or an UPDATE), not by isolation level. A deadlock or serialization
// failure rolls everything back, so fn runs again from the start; fn must
// therefore assign its results rather than accumulate them.
func (s *Store) inTx(ctx context.Context, fn func(tx pgx.Tx) error) error {
	var err error
	for attempt := 0; attempt < maxTxAttempts; attempt++ {
		gen := s.outbox.Gen()
		err = pgx.BeginFunc(ctx, s.pool, fn)
		if err == nil {
			s.outbox.AfterCommit(gen)
		}
		if !retryable(err) || ctx.Err() != nil {
			return err
		}
		s.log.Debug("postgres: retrying transaction", "attempt", attempt+1, "err", err)
	}
	return err
}
