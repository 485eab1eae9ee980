package sqlite

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// AppendMessages implements store.MessageStore. Seq stays dense because the
// max is read and extended inside the one write transaction.
func (s *Store) AppendMessages(ctx context.Context, sessionID string, msgs []store.NewMessage) (int64, error) {
	if err := validateMessages(msgs); err != nil {
		return 0, err
	}
	var last int64
	err := s.inTx(ctx, func(tx *wtx) error {
		if err := requireSession(ctx, tx, sessionID); err != nil {
			return err
		}
		var err error
		if last, err = s.appendTx(ctx, tx, sessionID, msgs); err != nil {
			return err
		}
		if len(msgs) > 0 {
			return s.bumpVersion(ctx, tx, sessionID)
		}
		return nil
	})
	return last, err
}

func validateMessages(msgs []store.NewMessage) error {
	for i, m := range msgs {
		if m.Role == "" {
			return fmt.Errorf("message %d: role is required: %w", i, store.ErrInvalid)
		}
		if !json.Valid(m.Content) {
			return fmt.Errorf("message %d: content is not valid JSON: %w", i, store.ErrInvalid)
		}
	}
	return nil
}

// appendTx appends msgs after the current last Seq and returns the new last.
func (s *Store) appendTx(ctx context.Context, tx *wtx, sessionID string, msgs []store.NewMessage) (int64, error) {
	var last int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?`,
		sessionID).Scan(&last); err != nil {
		return 0, fmt.Errorf("sqlite: read last message of %q: %w", sessionID, err)
	}
	if len(msgs) == 0 {
		return last, nil
	}
	stmt, err := tx.PrepareContext(ctx, `INSERT INTO messages (session_id, seq, role, content, created_at)
		VALUES (?, ?, ?, ?, ?)`)
	if err != nil {
		return 0, fmt.Errorf("sqlite: prepare message insert: %w", err)
	}
	defer stmt.Close()
	now := micros(s.timestamp())
	for _, m := range msgs {
		last++
		if _, err := stmt.ExecContext(ctx, sessionID, last, m.Role, string(m.Content), now); err != nil {
			return 0, fmt.Errorf("sqlite: append message %d to %q: %w", last, sessionID, err)
		}
	}
	return last, nil
}

// bumpVersion records one modification of the session.
func (s *Store) bumpVersion(ctx context.Context, tx *wtx, sessionID string) error {
	_, err := tx.ExecContext(ctx, `UPDATE sessions SET version = version + 1, updated_at = ? WHERE id = ?`,
		micros(s.timestamp()), sessionID)
	if err != nil {
		return fmt.Errorf("sqlite: bump version of %q: %w", sessionID, err)
	}
	return nil
}

// GetMessages implements store.MessageStore.
func (s *Store) GetMessages(ctx context.Context, p store.GetMessagesParams) ([]store.Message, error) {
	if p.AfterSeq < 0 {
		return nil, fmt.Errorf("after_seq must be >= 0, got %d: %w", p.AfterSeq, store.ErrInvalid)
	}
	limit := int64(p.Limit)
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.read.QueryContext(ctx, `SELECT seq, role, content, created_at FROM messages
		WHERE session_id = ? AND seq > ? ORDER BY seq LIMIT ?`, p.SessionID, p.AfterSeq, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: get messages of %q: %w", p.SessionID, err)
	}
	defer rows.Close()
	var out []store.Message
	for rows.Next() {
		m := store.Message{SessionID: p.SessionID}
		var content string
		var created int64
		if err := rows.Scan(&m.Seq, &m.Role, &content, &created); err != nil {
			return nil, fmt.Errorf("sqlite: scan message: %w", err)
		}
		m.Content, m.CreatedAt = json.RawMessage(content), fromMicros(created)
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: get messages of %q: %w", p.SessionID, err)
	}
	if len(out) == 0 {
		// Only an empty page needs to tell "no session" from "no messages".
		return nil, requireSession(ctx, s.read, p.SessionID)
	}
	return out, nil
}

// CountMessages implements store.MessageStore.
func (s *Store) CountMessages(ctx context.Context, sessionID string) (int64, error) {
	var n int64
	// Seq is dense from 1: the max is the count, without a scan.
	if err := s.read.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?`,
		sessionID).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count messages of %q: %w", sessionID, err)
	}
	if n == 0 {
		return 0, requireSession(ctx, s.read, sessionID)
	}
	return n, nil
}

// TruncateMessages implements store.MessageStore.
func (s *Store) TruncateMessages(ctx context.Context, sessionID string, keep int64) error {
	if keep < 0 {
		return fmt.Errorf("keep must be >= 0, got %d: %w", keep, store.ErrInvalid)
	}
	return s.inTx(ctx, func(tx *wtx) error {
		if err := requireSession(ctx, tx, sessionID); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE session_id = ? AND seq > ?`,
			sessionID, keep); err != nil {
			return fmt.Errorf("sqlite: truncate messages of %q: %w", sessionID, err)
		}
		return s.bumpVersion(ctx, tx, sessionID)
	})
}
