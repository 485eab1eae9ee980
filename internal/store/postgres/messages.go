package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// messageArgs validates msgs and splits them into the parallel arrays the
// unnest-based inserts take.
func messageArgs(msgs []store.NewMessage) (roles, contents []string, err error) {
	roles = make([]string, len(msgs))
	contents = make([]string, len(msgs))
	for i, m := range msgs {
		if m.Role == "" {
			return nil, nil, fmt.Errorf("message %d: Role is required: %w", i, store.ErrInvalid)
		}
		if len(m.Content) == 0 || !json.Valid(m.Content) {
			return nil, nil, fmt.Errorf("message %d: Content must be valid JSON: %w", i, store.ErrInvalid)
		}
		roles[i], contents[i] = m.Role, string(m.Content)
	}
	return roles, contents, nil
}

// AppendMessages appends in one statement: the UPDATE takes the session row
// lock and advances message_count, so concurrent appenders get dense,
// non-overlapping Seq ranges. It returns the Seq of the last message.
func (s *Store) AppendMessages(ctx context.Context, sessionID string, msgs []store.NewMessage) (int64, error) {
	op := fmt.Sprintf("session %s: append messages", sessionID)
	if len(msgs) == 0 {
		n, err := s.CountMessages(ctx, sessionID)
		if err != nil {
			return 0, err
		}
		return n, nil
	}
	roles, contents, err := messageArgs(msgs)
	if err != nil {
		return 0, err
	}
	var last *int64
	err = s.pool.QueryRow(ctx, `WITH s AS (
			UPDATE sessions SET message_count = message_count + $2, version = version + 1, updated_at = $3
			WHERE id = $1 RETURNING message_count),
		ins AS (
			INSERT INTO messages (session_id, seq, role, content, created_at)
			SELECT $1, s.message_count - $2 + m.ord, m.role, m.content::json, $3
			FROM s, unnest($4::text[], $5::text[]) WITH ORDINALITY AS m(role, content, ord)
			RETURNING seq)
		SELECT max(seq) FROM ins`, sessionID, len(msgs), s.clock(), roles, contents).Scan(&last)
	if err != nil {
		return 0, mapErr(op, err)
	}
	if last == nil {
		return 0, fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return *last, nil
}

// insertMessages appends msgs after seq base inside a transaction that
// already holds the session row lock.
func insertMessages(ctx context.Context, tx pgx.Tx, sessionID string, base int64, msgs []store.NewMessage, now time.Time) error {
	if len(msgs) == 0 {
		return nil
	}
	roles, contents, err := messageArgs(msgs)
	if err != nil {
		return err
	}
	_, err = tx.Exec(ctx, `INSERT INTO messages (session_id, seq, role, content, created_at)
		SELECT $1, $2 + m.ord, m.role, m.content::json, $3
		FROM unnest($4::text[], $5::text[]) WITH ORDINALITY AS m(role, content, ord)`,
		sessionID, base, now, roles, contents)
	return mapErr(fmt.Sprintf("session %s: insert messages", sessionID), err)
}

// GetMessages pages through messages in Seq order.
func (s *Store) GetMessages(ctx context.Context, p store.GetMessagesParams) ([]store.Message, error) {
	op := fmt.Sprintf("session %s: get messages", p.SessionID)
	if p.AfterSeq < 0 {
		return nil, fmt.Errorf("%s: AfterSeq %d is negative: %w", op, p.AfterSeq, store.ErrInvalid)
	}
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	rows, err := s.pool.Query(ctx, `SELECT session_id, seq, role, content, created_at FROM messages
		WHERE session_id = $1 AND seq > $2 ORDER BY seq LIMIT $3`, p.SessionID, p.AfterSeq, limit)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.Message, error) {
		var m store.Message
		var content []byte
		err := row.Scan(&m.SessionID, &m.Seq, &m.Role, &content, &m.CreatedAt)
		m.Content, m.CreatedAt = content, m.CreatedAt.UTC()
		return m, err
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	if len(out) == 0 {
		return nil, requireSession(ctx, s.pool, p.SessionID)
	}
	return out, nil
}

// CountMessages reads the session's message counter.
func (s *Store) CountMessages(ctx context.Context, sessionID string) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, "SELECT message_count FROM sessions WHERE id = $1", sessionID).Scan(&n)
	if err != nil {
		return 0, mapErr(fmt.Sprintf("session %s: count messages", sessionID), err)
	}
	return n, nil
}

// TruncateMessages keeps the first keep messages. The UPDATE takes the row
// lock first and the DELETE runs as a later statement, so its snapshot sees
// every append that committed before the lock was granted.
func (s *Store) TruncateMessages(ctx context.Context, sessionID string, keep int64) error {
	op := fmt.Sprintf("session %s: truncate messages", sessionID)
	if keep < 0 {
		return fmt.Errorf("%s: keep %d is negative: %w", op, keep, store.ErrInvalid)
	}
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var n int64
		if err := tx.QueryRow(ctx, `UPDATE sessions SET message_count = least(message_count, $2),
			version = version + 1, updated_at = $3 WHERE id = $1 RETURNING message_count`,
			sessionID, keep, s.clock()).Scan(&n); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, "DELETE FROM messages WHERE session_id = $1 AND seq > $2", sessionID, keep)
		return err
	})
	return mapErr(op, err)
}
