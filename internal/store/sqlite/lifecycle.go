package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// DeleteSession removes the session; foreign keys with ON DELETE CASCADE
// remove its messages, runs, checkpoints, staging and sub-session refs in the
// same statement.
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM sessions WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete session %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// DeleteExpiredSessions implements store.SessionStore.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	res, err := s.write.ExecContext(ctx,
		`DELETE FROM sessions WHERE expires_at IS NOT NULL AND expires_at < ?`, micros(now))
	if err != nil {
		return 0, fmt.Errorf("sqlite: delete expired sessions: %w", err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}

// ListSessions pages newest first by (created_at, id).
func (s *Store) ListSessions(ctx context.Context, p store.ListSessionsParams) ([]*store.Session, error) {
	limit := int64(p.Limit)
	if limit <= 0 {
		limit = -1 // SQLite: no limit
	}
	var rows *sql.Rows
	var err error
	if p.AfterID == "" {
		rows, err = s.read.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE tenant_id = ?
			ORDER BY created_at DESC, id DESC LIMIT ?`, p.TenantID, limit)
	} else {
		var after int64
		err = s.read.QueryRowContext(ctx, `SELECT created_at FROM sessions WHERE id = ? AND tenant_id = ?`,
			p.AfterID, p.TenantID).Scan(&after)
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("list cursor: session %q: %w", p.AfterID, store.ErrNotFound)
		}
		if err != nil {
			return nil, fmt.Errorf("sqlite: read list cursor: %w", err)
		}
		rows, err = s.read.QueryContext(ctx, `SELECT `+sessionCols+` FROM sessions WHERE tenant_id = ?
			AND (created_at < ? OR (created_at = ? AND id < ?))
			ORDER BY created_at DESC, id DESC LIMIT ?`, p.TenantID, after, after, p.AfterID, limit)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	defer rows.Close()
	var out []*store.Session
	for rows.Next() {
		sess, err := scanSession(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list sessions: %w", err)
		}
		out = append(out, sess)
	}
	return out, rows.Err()
}
