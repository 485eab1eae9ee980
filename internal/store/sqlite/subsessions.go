package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// AddSubSessionRefs adds all refs in one transaction: all or none.
func (s *Store) AddSubSessionRefs(ctx context.Context, refs []store.SubSessionRef) error {
	for i, r := range refs {
		if r.SessionID == "" || r.SubSessionID == "" {
			return fmt.Errorf("sub-session ref %d: session id and sub-session id are required: %w", i, store.ErrInvalid)
		}
		if _, err := jsonValue("sub-session result", r.Result); err != nil {
			return err
		}
	}
	return s.inTx(ctx, func(tx *wtx) error {
		now := micros(s.timestamp())
		for _, r := range refs {
			if err := requireSession(ctx, tx, r.SessionID); err != nil {
				return err
			}
			result, _ := jsonValue("sub-session result", r.Result)
			res, err := tx.ExecContext(ctx, `INSERT INTO sub_session_refs (session_id, sub_session_id, agent_type,
				parent_tool_call_id, status, result, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)
				ON CONFLICT (session_id, sub_session_id) DO NOTHING`,
				r.SessionID, r.SubSessionID, r.AgentType, r.ParentToolCallID, r.Status, result, now, now)
			if err != nil {
				return fmt.Errorf("sqlite: add sub-session ref %q: %w", r.SubSessionID, err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				return fmt.Errorf("sub-session ref %q of %q: %w", r.SubSessionID, r.SessionID, store.ErrAlreadyExists)
			}
		}
		return nil
	})
}

// UpdateSubSessionRef implements store.SubSessionStore.
func (s *Store) UpdateSubSessionRef(ctx context.Context, p store.UpdateSubSessionRefParams) error {
	result, err := jsonValue("sub-session result", p.Result)
	if err != nil {
		return err
	}
	res, err := s.write.ExecContext(ctx, `UPDATE sub_session_refs SET status = ?, result = ?, updated_at = ?
		WHERE session_id = ? AND sub_session_id = ?`,
		p.Status, result, micros(s.timestamp()), p.SessionID, p.SubSessionID)
	if err != nil {
		return fmt.Errorf("sqlite: update sub-session ref %q: %w", p.SubSessionID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("sub-session ref %q of %q: %w", p.SubSessionID, p.SessionID, store.ErrNotFound)
	}
	return nil
}

// ListSubSessionRefs lists refs in the order they were added.
func (s *Store) ListSubSessionRefs(ctx context.Context, sessionID string) ([]store.SubSessionRef, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT sub_session_id, agent_type, parent_tool_call_id, status, result,
		created_at, updated_at FROM sub_session_refs WHERE session_id = ? ORDER BY ord`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sub-session refs of %q: %w", sessionID, err)
	}
	defer rows.Close()
	var out []store.SubSessionRef
	for rows.Next() {
		r := store.SubSessionRef{SessionID: sessionID}
		var result sql.NullString
		var created, updated int64
		if err := rows.Scan(&r.SubSessionID, &r.AgentType, &r.ParentToolCallID, &r.Status, &result,
			&created, &updated); err != nil {
			return nil, fmt.Errorf("sqlite: scan sub-session ref: %w", err)
		}
		r.Result, r.CreatedAt, r.UpdatedAt = rawOrNil(result), fromMicros(created), fromMicros(updated)
		out = append(out, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list sub-session refs of %q: %w", sessionID, err)
	}
	if len(out) == 0 {
		return nil, requireSession(ctx, s.read, sessionID)
	}
	return out, nil
}
