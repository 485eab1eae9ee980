package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// opWrite is a validated store.EventOp: the op to start (its args
// encoded) or the id and result of the op to complete.
type opWrite struct {
	start    *store.Op
	args     sql.NullString
	complete string
	result   sql.NullString
}

// validateEventOp checks an event's op write (nil: none) for sessionID.
func validateEventOp(sessionID string, o *store.EventOp) (*opWrite, error) {
	if err := store.CheckEventOp(sessionID, o); err != nil || o == nil {
		return nil, err
	}
	if o.Start != nil {
		op := *o.Start
		op.SessionID = sessionID
		args, err := validateOp(&op)
		if err != nil {
			return nil, err
		}
		return &opWrite{start: &op, args: args}, nil
	}
	res, err := jsonValue(fmt.Sprintf("op %q: result", o.Complete.ID), o.Complete.Result)
	if err != nil {
		return nil, err
	}
	return &opWrite{complete: o.Complete.ID, result: res}, nil
}

// writeEventOpsTx writes the op journal writes rows carry in the
// transaction that stores them (store.EventOp): a start of an op already
// in the journal is ErrAlreadyExists, a completion of an op not in it
// ErrNotFound, and either fails the whole transaction.
func writeEventOpsTx(ctx context.Context, tx *wtx, now time.Time, sessionID string, rows []newEventRow) error {
	for _, r := range rows {
		o := r.op
		switch {
		case o == nil:
			continue
		case o.start != nil:
			op := o.start
			started := op.StartedAt
			if started.IsZero() {
				started = now
			}
			res, err := tx.ExecContext(ctx, `INSERT INTO ops
				(session_id, id, kind, turn_seq, step, op_index, args, status, started_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, 'started', ?)
				ON CONFLICT (session_id, id) DO NOTHING`,
				sessionID, op.ID, op.Kind, op.TurnSeq, op.Step, op.Index, o.args, micros(started))
			if err != nil {
				return fmt.Errorf("sqlite: start op %q with event %q: %w", op.ID, r.id, err)
			}
			if n, err := res.RowsAffected(); err != nil {
				return fmt.Errorf("sqlite: start op %q with event %q: %w", op.ID, r.id, err)
			} else if n == 0 {
				return fmt.Errorf("op %q of session %q is already in the journal: %w", op.ID, sessionID, store.ErrAlreadyExists)
			}
		default:
			res, err := tx.ExecContext(ctx, `UPDATE ops SET status = 'completed', result = ?, completed_at = ?
				WHERE session_id = ? AND id = ? AND status = 'started'`, o.result, micros(now), sessionID, o.complete)
			if err != nil {
				return fmt.Errorf("sqlite: complete op %q with event %q: %w", o.complete, r.id, err)
			}
			n, err := res.RowsAffected()
			if err != nil {
				return fmt.Errorf("sqlite: complete op %q with event %q: %w", o.complete, r.id, err)
			}
			if n > 0 {
				continue
			}
			// Completed before (its first result stands), or unknown.
			var one int
			err = tx.QueryRowContext(ctx, `SELECT 1 FROM ops WHERE session_id = ? AND id = ?`, sessionID, o.complete).Scan(&one)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("op %q of session %q: %w", o.complete, sessionID, store.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("sqlite: read op %q: %w", o.complete, err)
			}
		}
	}
	return nil
}
