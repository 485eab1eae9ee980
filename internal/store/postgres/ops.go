package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

var _ store.OpStore = (*Store)(nil)

// opCols is the column list scanOp reads, in order.
const opCols = `session_id, id, kind, turn_seq, step, op_index, args, status, result, started_at, completed_at`

func scanOp(row pgx.Row) (*store.Op, error) {
	var (
		op           store.Op
		args, result []byte
		status       string
	)
	if err := row.Scan(&op.SessionID, &op.ID, &op.Kind, &op.TurnSeq, &op.Step, &op.Index,
		&args, &status, &result, &op.StartedAt, &op.CompletedAt); err != nil {
		return nil, err
	}
	op.Args, op.Result = rawOrNil(args), rawOrNil(result)
	op.Status = store.OpStatus(status)
	op.StartedAt, op.CompletedAt = op.StartedAt.UTC(), utcPtr(op.CompletedAt)
	return &op, nil
}

// validateOp checks what StartOp writes; it returns the args argument.
func validateOp(op *store.Op) (any, error) {
	what := fmt.Sprintf("op %q of session %q", op.ID, op.SessionID)
	switch {
	case op.ID == "" || op.SessionID == "" || op.Kind == "":
		return nil, fmt.Errorf("%s: ID, SessionID and Kind are required: %w", what, store.ErrInvalid)
	case op.TurnSeq < 0 || op.Step < 0 || op.Index < 0:
		return nil, fmt.Errorf("%s: position (%d, %d, %d) must not be negative: %w",
			what, op.TurnSeq, op.Step, op.Index, store.ErrInvalid)
	}
	return jsonArg(what+": Args", op.Args)
}

// StartOp records op as started, whatever Status, Result and CompletedAt it
// carries; zero StartedAt becomes now. ON CONFLICT DO NOTHING waits for a
// concurrent inserter of the same key to commit, so a loser's follow-up
// read sees the winner's row, which it returns with ErrAlreadyExists.
func (s *Store) StartOp(ctx context.Context, op *store.Op) (*store.Op, error) {
	args, err := validateOp(op)
	if err != nil {
		return nil, err
	}
	started := op.StartedAt
	if started.IsZero() {
		started = s.clock()
	}
	out, err := scanOp(s.pool.QueryRow(ctx, `INSERT INTO ops
		(session_id, id, kind, turn_seq, step, op_index, args, status, started_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, 'started', $8)
		ON CONFLICT (session_id, id) DO NOTHING RETURNING `+opCols,
		op.SessionID, op.ID, op.Kind, op.TurnSeq, op.Step, op.Index, args, started))
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapErr(fmt.Sprintf("start op %s", op.ID), err)
	}
	out, err = s.getOp(ctx, op.SessionID, op.ID)
	if err != nil {
		return nil, err
	}
	return out, fmt.Errorf("op %q of session %q (status %s): %w", op.ID, op.SessionID, out.Status, store.ErrAlreadyExists)
}

// CompleteOp completes a started op. A concurrent completer waits for the
// row lock and re-checks status = 'started' against the committed row, so
// exactly one wins; the others, and any later call, get the op as it stands
// (first result kept) with ErrConflict.
func (s *Store) CompleteOp(ctx context.Context, sessionID, opID string, result json.RawMessage) (*store.Op, error) {
	res, err := jsonArg(fmt.Sprintf("op %q: result", opID), result)
	if err != nil {
		return nil, err
	}
	out, err := scanOp(s.pool.QueryRow(ctx, `UPDATE ops SET
		status = 'completed', result = $3, completed_at = $4
		WHERE session_id = $1 AND id = $2 AND status = 'started' RETURNING `+opCols,
		sessionID, opID, res, s.clock()))
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapErr(fmt.Sprintf("complete op %s", opID), err)
	}
	out, err = s.getOp(ctx, sessionID, opID)
	if err != nil {
		return nil, err
	}
	return out, fmt.Errorf("complete op %q of session %q: already completed: %w", opID, sessionID, store.ErrConflict)
}

// GetOp returns the op or ErrNotFound.
func (s *Store) GetOp(ctx context.Context, sessionID, opID string) (*store.Op, error) {
	return s.getOp(ctx, sessionID, opID)
}

func (s *Store) getOp(ctx context.Context, sessionID, opID string) (*store.Op, error) {
	op, err := scanOp(s.pool.QueryRow(ctx,
		`SELECT `+opCols+` FROM ops WHERE session_id = $1 AND id = $2`, sessionID, opID))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("op %s of session %s", opID, sessionID), err)
	}
	return op, nil
}

// ListOps lists a session's ops (of one turn when turnSeq > 0) in position
// order, id breaking ties.
func (s *Store) ListOps(ctx context.Context, sessionID string, turnSeq int64) ([]*store.Op, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+opCols+` FROM ops
		WHERE session_id = $1 AND ($2::bigint <= 0 OR turn_seq = $2)
		ORDER BY turn_seq, step, op_index, id`, sessionID, turnSeq)
	if err != nil {
		return nil, mapErr(fmt.Sprintf("list ops of session %s", sessionID), err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Op, error) { return scanOp(row) })
	if err != nil {
		return nil, mapErr(fmt.Sprintf("list ops of session %s", sessionID), err)
	}
	if out == nil {
		out = []*store.Op{}
	}
	return out, nil
}
