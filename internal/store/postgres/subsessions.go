package postgres

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// AddSubSessionRefs inserts refs in one transaction; a ref that already
// exists for (session, sub-session) fails the whole call with
// ErrAlreadyExists, and a missing parent with ErrNotFound.
func (s *Store) AddSubSessionRefs(ctx context.Context, refs []store.SubSessionRef) error {
	for i, r := range refs {
		if r.SessionID == "" || r.SubSessionID == "" {
			return fmt.Errorf("sub-session ref %d: SessionID and SubSessionID are required: %w", i, store.ErrInvalid)
		}
		if _, err := jsonArg("Result", r.Result); err != nil {
			return fmt.Errorf("sub-session ref %d: %w", i, err)
		}
	}
	if len(refs) == 0 {
		return nil
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		now := s.clock()
		for _, r := range refs {
			created := r.CreatedAt
			if created.IsZero() {
				created = now
			}
			result, _ := jsonArg("Result", r.Result)
			_, err := tx.Exec(ctx, `INSERT INTO sub_session_refs
				(session_id, sub_session_id, agent_type, parent_tool_call_id, status, result, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $7)`,
				r.SessionID, r.SubSessionID, r.AgentType, r.ParentToolCallID, r.Status, result, created)
			if isUniqueViolation(err) {
				return fmt.Errorf("sub-session ref %s → %s: %w", r.SessionID, r.SubSessionID, store.ErrAlreadyExists)
			}
			if err != nil {
				return mapErr(fmt.Sprintf("sub-session ref %s → %s", r.SessionID, r.SubSessionID), err)
			}
		}
		return nil
	})
	return mapErr("add sub-session refs", err)
}

// UpdateSubSessionRef replaces one ref's status and result.
func (s *Store) UpdateSubSessionRef(ctx context.Context, p store.UpdateSubSessionRefParams) error {
	op := fmt.Sprintf("update sub-session ref %s → %s", p.SessionID, p.SubSessionID)
	result, err := jsonArg("Result", p.Result)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	tag, err := s.pool.Exec(ctx, `UPDATE sub_session_refs SET status = $3,
		result = $4::json, updated_at = $5
		WHERE session_id = $1 AND sub_session_id = $2`, p.SessionID, p.SubSessionID, p.Status, result, s.clock())
	if err != nil {
		return mapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return nil
}

// ListSubSessionRefs returns a parent's refs in the order they were added.
func (s *Store) ListSubSessionRefs(ctx context.Context, sessionID string) ([]store.SubSessionRef, error) {
	op := fmt.Sprintf("session %s: list sub-session refs", sessionID)
	rows, err := s.pool.Query(ctx, `SELECT session_id, sub_session_id, agent_type, parent_tool_call_id,
		status, result, created_at, updated_at FROM sub_session_refs WHERE session_id = $1 ORDER BY ord`, sessionID)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.SubSessionRef, error) {
		var r store.SubSessionRef
		var result []byte
		err := row.Scan(&r.SessionID, &r.SubSessionID, &r.AgentType, &r.ParentToolCallID,
			&r.Status, &result, &r.CreatedAt, &r.UpdatedAt)
		r.Result, r.CreatedAt, r.UpdatedAt = rawOrNil(result), r.CreatedAt.UTC(), r.UpdatedAt.UTC()
		return r, err
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	if len(out) == 0 {
		return nil, requireSession(ctx, s.pool, sessionID)
	}
	return out, nil
}
