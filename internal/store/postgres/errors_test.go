package postgres

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentkernel/agentkernel/internal/store"
)

func TestMapErr(t *testing.T) {
	cases := []struct {
		in   error
		want error
	}{
		{pgx.ErrNoRows, store.ErrNotFound},
		{&pgconn.PgError{Code: codeUniqueViolation}, store.ErrConflict},
		{&pgconn.PgError{Code: codeForeignKeyViolation}, store.ErrNotFound},
		{&pgconn.PgError{Code: codeInvalidText}, store.ErrInvalid},
		{&store.StaleStateError{SessionID: "s"}, store.ErrVersionMismatch},
	}
	for _, c := range cases {
		got := mapErr("op", c.in)
		if !errors.Is(got, c.want) {
			t.Errorf("mapErr(%v) = %v, want %v", c.in, got, c.want)
		}
		// A native Postgres error stays reachable for logs and debugging.
		var pgErr *pgconn.PgError
		if errors.As(c.in, &pgErr) && !errors.Is(got, c.in) {
			t.Errorf("mapErr(%v) = %v lost the original error", c.in, got)
		}
	}
	if mapErr("op", nil) != nil {
		t.Error("mapErr(nil) is not nil")
	}
}

// A serialization failure or deadlock rolls the whole transaction back, so
// inTx runs it again; other errors are returned at once.
func TestInTxRetriesOnlyRetryableErrors(t *testing.T) {
	s := openTest(t)
	ctx := context.Background()
	sess := newSession(t, s, "sesn_retry")

	attempts := 0
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		attempts++
		if _, err := tx.Exec(ctx, "UPDATE sessions SET step_count = step_count + 1 WHERE id = $1", sess.ID); err != nil {
			return err
		}
		if attempts == 1 {
			return &pgconn.PgError{Code: codeDeadlockDetected}
		}
		return nil
	})
	if err != nil || attempts != 2 {
		t.Fatalf("err %v after %d attempts, want success on the 2nd", err, attempts)
	}
	if got, _ := s.GetSession(ctx, sess.ID); got.StepCount != 1 {
		t.Fatalf("step count %d: the failed attempt was not rolled back", got.StepCount)
	}

	attempts = 0
	boom := errors.New("boom")
	if err := s.inTx(ctx, func(pgx.Tx) error { attempts++; return boom }); !errors.Is(err, boom) || attempts != 1 {
		t.Fatalf("err %v after %d attempts, want boom after 1", err, attempts)
	}
}
