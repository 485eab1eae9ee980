package postgres

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// stagedMessage is how a staged message is kept in the messages json column.
type stagedMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

func encodeStaged(msgs []store.NewMessage) (string, error) {
	if _, _, err := messageArgs(msgs); err != nil {
		return "", err
	}
	out := make([]stagedMessage, len(msgs))
	for i, m := range msgs {
		out[i] = stagedMessage(m)
	}
	b, err := json.Marshal(out)
	return string(b), err
}

func decodeStaged(raw []byte) ([]store.NewMessage, error) {
	var in []stagedMessage
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, fmt.Errorf("decode staged messages: %w", err)
	}
	if len(in) == 0 {
		return nil, nil
	}
	out := make([]store.NewMessage, len(in))
	for i, m := range in {
		out[i] = store.NewMessage(m)
	}
	return out, nil
}

// StageChanges records or replaces the staged change for (session, step).
// A replaced change keeps its place in staging order. Staging is a side
// channel: the session's version does not move.
func (s *Store) StageChanges(ctx context.Context, c store.StagedChange) error {
	op := fmt.Sprintf("session %s: stage changes for step %s", c.SessionID, c.StepID)
	if c.SessionID == "" || c.StepID == "" {
		return fmt.Errorf("%s: SessionID and StepID are required: %w", op, store.ErrInvalid)
	}
	msgs, err := encodeStaged(c.Messages)
	if err != nil {
		return fmt.Errorf("%s: %w", op, err)
	}
	var writes any
	if len(c.StateWrites) > 0 {
		if _, err := decodeObject("StateWrites", c.StateWrites); err != nil {
			return fmt.Errorf("%s: %w", op, err)
		}
		writes = string(c.StateWrites)
	}
	created := c.CreatedAt
	if created.IsZero() {
		created = s.clock()
	}
	tag, err := s.pool.Exec(ctx, `INSERT INTO staged_changes (session_id, step_id, messages, state_writes, created_at)
		SELECT $1, $2, $3, $4, $5 WHERE EXISTS (SELECT 1 FROM sessions WHERE id = $1)
		ON CONFLICT (session_id, step_id) DO UPDATE SET
			messages = excluded.messages, state_writes = excluded.state_writes, created_at = excluded.created_at`,
		c.SessionID, c.StepID, msgs, writes, created)
	if err != nil {
		return mapErr(op, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%s: %w", op, store.ErrNotFound)
	}
	return nil
}

func scanStaged(row pgx.CollectableRow) (store.StagedChange, error) {
	var (
		c            store.StagedChange
		msgs, writes []byte
	)
	if err := row.Scan(&c.SessionID, &c.StepID, &msgs, &writes, &c.CreatedAt); err != nil {
		return c, err
	}
	c.CreatedAt = c.CreatedAt.UTC()
	c.StateWrites = rawOrNil(writes)
	var err error
	c.Messages, err = decodeStaged(msgs)
	return c, err
}

// GetStagedChanges returns the session's staged changes in staging order.
func (s *Store) GetStagedChanges(ctx context.Context, sessionID string) ([]store.StagedChange, error) {
	op := fmt.Sprintf("session %s: get staged changes", sessionID)
	rows, err := s.pool.Query(ctx, `SELECT session_id, step_id, messages, state_writes, created_at
		FROM staged_changes WHERE session_id = $1 ORDER BY ord`, sessionID)
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := pgx.CollectRows(rows, scanStaged)
	if err != nil {
		return nil, mapErr(op, err)
	}
	if len(out) == 0 {
		return nil, requireSession(ctx, s.pool, sessionID)
	}
	return out, nil
}

// HasStagedChanges reports whether the session has anything staged.
func (s *Store) HasStagedChanges(ctx context.Context, sessionID string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM staged_changes WHERE session_id = $1)", sessionID).Scan(&ok)
	if err != nil {
		return false, mapErr(fmt.Sprintf("session %s: has staged changes", sessionID), err)
	}
	if !ok {
		return false, requireSession(ctx, s.pool, sessionID)
	}
	return true, nil
}

// DiscardStaging drops every staged change of the session.
func (s *Store) DiscardStaging(ctx context.Context, sessionID string) error {
	tag, err := s.pool.Exec(ctx, "DELETE FROM staged_changes WHERE session_id = $1", sessionID)
	if err != nil {
		return mapErr(fmt.Sprintf("session %s: discard staging", sessionID), err)
	}
	if tag.RowsAffected() == 0 {
		return requireSession(ctx, s.pool, sessionID)
	}
	return nil
}

// CleanupOrphanedStaging removes staged changes older than olderThan and
// those whose session is gone.
func (s *Store) CleanupOrphanedStaging(ctx context.Context, olderThan time.Time) (int, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM staged_changes st WHERE st.created_at < $1
		OR NOT EXISTS (SELECT 1 FROM sessions WHERE id = st.session_id)`, olderThan)
	if err != nil {
		return 0, mapErr("cleanup orphaned staging", err)
	}
	return int(tag.RowsAffected()), nil
}
