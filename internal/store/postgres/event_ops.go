package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// opWrite is a validated store.EventOp: the op to start (its args
// argument) or the id and result of the op to complete.
type opWrite struct {
	start    *store.Op
	args     any
	complete string
	result   any
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
	res, err := jsonArg(fmt.Sprintf("op %q: result", o.Complete.ID), o.Complete.Result)
	if err != nil {
		return nil, err
	}
	return &opWrite{complete: o.Complete.ID, result: res}, nil
}

// writeEventOps writes the op journal writes of b's events in the
// transaction that stores them (store.EventOp): a start of an op already
// in the journal is ErrAlreadyExists, a completion of an op not in it
// ErrNotFound, and either fails the whole transaction.
func writeEventOps(ctx context.Context, tx pgx.Tx, now time.Time, sessionID string, b eventBatch) error {
	for i, o := range b.ops {
		switch {
		case o == nil:
			continue
		case o.start != nil:
			op := o.start
			started := op.StartedAt
			if started.IsZero() {
				started = now
			}
			tag, err := tx.Exec(ctx, `INSERT INTO ops
				(session_id, id, kind, turn_seq, step, op_index, args, status, started_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, 'started', $8)
				ON CONFLICT (session_id, id) DO NOTHING`,
				sessionID, op.ID, op.Kind, op.TurnSeq, op.Step, op.Index, o.args, started)
			if err != nil {
				return mapErr(fmt.Sprintf("start op %s with event %s", op.ID, b.ids[i]), err)
			}
			if tag.RowsAffected() == 0 {
				return fmt.Errorf("op %q of session %q is already in the journal: %w", op.ID, sessionID, store.ErrAlreadyExists)
			}
		default:
			tag, err := tx.Exec(ctx, `UPDATE ops SET status = 'completed', result = $3, completed_at = $4
				WHERE session_id = $1 AND id = $2 AND status = 'started'`, sessionID, o.complete, o.result, now)
			if err != nil {
				return mapErr(fmt.Sprintf("complete op %s with event %s", o.complete, b.ids[i]), err)
			}
			if tag.RowsAffected() > 0 {
				continue
			}
			// Completed before (its first result stands), or unknown.
			var one int
			err = tx.QueryRow(ctx, `SELECT 1 FROM ops WHERE session_id = $1 AND id = $2`, sessionID, o.complete).Scan(&one)
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("op %q of session %q: %w", o.complete, sessionID, store.ErrNotFound)
			}
			if err != nil {
				return mapErr(fmt.Sprintf("read op %s", o.complete), err)
			}
		}
	}
	return nil
}
