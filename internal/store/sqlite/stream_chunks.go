package sqlite

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// AppendStreamChunk implements store.OpStore. Writes queue on the one write
// connection, so MAX(seq)+1 read and insert in one transaction is dense
// under any number of concurrent appenders. Zero CreatedAt becomes now.
func (s *Store) AppendStreamChunk(ctx context.Context, c *store.StreamChunk) (*store.StreamChunk, error) {
	if err := validateChunk(c); err != nil {
		return nil, err
	}
	out := *c
	out.Data = append(json.RawMessage(nil), c.Data...)
	if out.CreatedAt.IsZero() {
		out.CreatedAt = s.timestamp()
	}
	err := s.inTx(ctx, func(tx *wtx) error {
		return tx.QueryRowContext(ctx, `INSERT INTO stream_chunks
			(session_id, turn_seq, step, seq, data, created_at)
			SELECT ?1, ?2, ?3, COALESCE(MAX(seq), 0) + 1, ?4, ?5 FROM stream_chunks
			WHERE session_id = ?1 AND turn_seq = ?2 AND step = ?3
			RETURNING seq`, c.SessionID, c.TurnSeq, c.Step, string(c.Data), micros(out.CreatedAt)).Scan(&out.Seq)
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: append stream chunk of session %q: %w", c.SessionID, err)
	}
	out.CreatedAt = fromMicros(micros(out.CreatedAt))
	return &out, nil
}

// validateChunk checks what AppendStreamChunk writes: Data is required.
func validateChunk(c *store.StreamChunk) error {
	switch {
	case c.SessionID == "":
		return fmt.Errorf("stream chunk: SessionID is required: %w", store.ErrInvalid)
	case c.TurnSeq < 0 || c.Step < 0:
		return fmt.Errorf("stream chunk of session %q: turn %d, step %d must not be negative: %w",
			c.SessionID, c.TurnSeq, c.Step, store.ErrInvalid)
	case len(bytes.TrimSpace(c.Data)) == 0 || !json.Valid(c.Data):
		return fmt.Errorf("stream chunk of session %q: Data must be JSON: %w", c.SessionID, store.ErrInvalid)
	}
	return nil
}

// ListStreamChunks implements store.OpStore.
func (s *Store) ListStreamChunks(ctx context.Context, sessionID string, turnSeq, step int64) ([]*store.StreamChunk, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT session_id, turn_seq, step, seq, data, created_at
		FROM stream_chunks WHERE session_id = ? AND turn_seq = ? AND step = ? ORDER BY seq`,
		sessionID, turnSeq, step)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list stream chunks of session %q: %w", sessionID, err)
	}
	defer rows.Close()
	out := []*store.StreamChunk{}
	for rows.Next() {
		var (
			c       store.StreamChunk
			data    string
			created int64
		)
		if err := rows.Scan(&c.SessionID, &c.TurnSeq, &c.Step, &c.Seq, &data, &created); err != nil {
			return nil, fmt.Errorf("sqlite: scan stream chunk: %w", err)
		}
		c.Data, c.CreatedAt = json.RawMessage(data), fromMicros(created)
		out = append(out, &c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list stream chunks of session %q: %w", sessionID, err)
	}
	return out, nil
}

// DeleteStreamChunks implements store.OpStore: the chunks and partial
// blocks of turns up to and including upToTurnSeq.
func (s *Store) DeleteStreamChunks(ctx context.Context, sessionID string, upToTurnSeq int64) error {
	err := s.inTx(ctx, func(tx *wtx) error {
		for _, q := range []string{
			`DELETE FROM stream_chunks WHERE session_id = ? AND turn_seq <= ?`,
			`DELETE FROM partial_blocks WHERE session_id = ? AND turn_seq <= ?`,
		} {
			if _, err := tx.ExecContext(ctx, q, sessionID, upToTurnSeq); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("sqlite: delete stream chunks of session %q: %w", sessionID, err)
	}
	return nil
}
