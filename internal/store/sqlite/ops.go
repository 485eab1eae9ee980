package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

var _ store.OpStore = (*Store)(nil)

// opCols is the column list scanOp reads, in order.
const opCols = `session_id, id, kind, turn_seq, step, op_index, args, status, result, started_at, completed_at`

func scanOp(r scanner) (*store.Op, error) {
	var (
		op           store.Op
		args, result sql.NullString
		status       string
		started      int64
		completed    sql.NullInt64
	)
	if err := r.Scan(&op.SessionID, &op.ID, &op.Kind, &op.TurnSeq, &op.Step, &op.Index,
		&args, &status, &result, &started, &completed); err != nil {
		return nil, err
	}
	op.Args, op.Result = rawOrNil(args), rawOrNil(result)
	op.Status = store.OpStatus(status)
	op.StartedAt, op.CompletedAt = fromMicros(started), timePtr(completed)
	return &op, nil
}

// validateOp checks what StartOp writes; it returns the encoded args.
func validateOp(op *store.Op) (sql.NullString, error) {
	what := fmt.Sprintf("op %q of session %q", op.ID, op.SessionID)
	switch {
	case op.ID == "" || op.SessionID == "" || op.Kind == "":
		return sql.NullString{}, fmt.Errorf("%s: ID, SessionID and Kind are required: %w", what, store.ErrInvalid)
	case op.TurnSeq < 0 || op.Step < 0 || op.Index < 0:
		return sql.NullString{}, fmt.Errorf("%s: position (%d, %d, %d) must not be negative: %w",
			what, op.TurnSeq, op.Step, op.Index, store.ErrInvalid)
	}
	return jsonValue(what+": Args", op.Args)
}

// StartOp implements store.OpStore. Whatever Status, Result and CompletedAt
// op carries, the row starts as started; zero StartedAt becomes now. ON
// CONFLICT DO NOTHING settles a replay or a race: the loser reads the row
// the winner wrote, in the same transaction, and gets it with
// ErrAlreadyExists.
func (s *Store) StartOp(ctx context.Context, op *store.Op) (*store.Op, error) {
	args, err := validateOp(op)
	if err != nil {
		return nil, err
	}
	started := op.StartedAt
	if started.IsZero() {
		started = s.timestamp()
	}
	var out *store.Op
	err = s.inTx(ctx, func(tx *wtx) error {
		row, err := scanOp(tx.QueryRowContext(ctx, `INSERT INTO ops
			(session_id, id, kind, turn_seq, step, op_index, args, status, started_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, 'started', ?)
			ON CONFLICT (session_id, id) DO NOTHING RETURNING `+opCols,
			op.SessionID, op.ID, op.Kind, op.TurnSeq, op.Step, op.Index, args, micros(started)))
		if err == nil {
			out = row
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: start op %q: %w", op.ID, err)
		}
		if out, err = scanOp(tx.QueryRowContext(ctx,
			`SELECT `+opCols+` FROM ops WHERE session_id = ? AND id = ?`, op.SessionID, op.ID)); err != nil {
			return fmt.Errorf("sqlite: read existing op %q: %w", op.ID, err)
		}
		return fmt.Errorf("op %q of session %q (status %s): %w", op.ID, op.SessionID, out.Status, store.ErrAlreadyExists)
	})
	if errors.Is(err, store.ErrAlreadyExists) {
		return out, err
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// CompleteOp implements store.OpStore. Only a started op is completed, so of
// racing completers exactly one matches; the others, and any later call,
// get the op as it stands (first result kept) with ErrConflict.
func (s *Store) CompleteOp(ctx context.Context, sessionID, opID string, result json.RawMessage) (*store.Op, error) {
	res, err := jsonValue(fmt.Sprintf("op %q: result", opID), result)
	if err != nil {
		return nil, err
	}
	var out *store.Op
	err = s.inTx(ctx, func(tx *wtx) error {
		row, err := scanOp(tx.QueryRowContext(ctx, `UPDATE ops SET
			status = 'completed', result = ?, completed_at = ?
			WHERE session_id = ? AND id = ? AND status = 'started' RETURNING `+opCols,
			res, micros(s.timestamp()), sessionID, opID))
		if err == nil {
			out = row
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: complete op %q: %w", opID, err)
		}
		out, err = scanOp(tx.QueryRowContext(ctx,
			`SELECT `+opCols+` FROM ops WHERE session_id = ? AND id = ?`, sessionID, opID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("op %q of session %q: %w", opID, sessionID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read op %q: %w", opID, err)
		}
		return fmt.Errorf("complete op %q of session %q: already completed: %w", opID, sessionID, store.ErrConflict)
	})
	switch {
	case errors.Is(err, store.ErrConflict):
		return out, err
	case err != nil:
		return nil, err
	}
	return out, nil
}

// GetOp implements store.OpStore.
func (s *Store) GetOp(ctx context.Context, sessionID, opID string) (*store.Op, error) {
	op, err := scanOp(s.read.QueryRowContext(ctx,
		`SELECT `+opCols+` FROM ops WHERE session_id = ? AND id = ?`, sessionID, opID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("op %q of session %q: %w", opID, sessionID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get op %q: %w", opID, err)
	}
	return op, nil
}

// ListOps implements store.OpStore: position order, id breaking ties.
func (s *Store) ListOps(ctx context.Context, sessionID string, turnSeq int64) ([]*store.Op, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+opCols+` FROM ops
		WHERE session_id = ?1 AND (?2 <= 0 OR turn_seq = ?2)
		ORDER BY turn_seq, step, op_index, id`, sessionID, turnSeq)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list ops of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := []*store.Op{}
	for rows.Next() {
		op, err := scanOp(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan op: %w", err)
		}
		out = append(out, op)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list ops of session %q: %w", sessionID, err)
	}
	return out, nil
}
