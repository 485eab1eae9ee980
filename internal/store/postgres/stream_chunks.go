package postgres

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// streamChunkCols is the column list scanStreamChunk reads, in order.
const streamChunkCols = `session_id, turn_seq, step, seq, data, created_at`

func scanStreamChunk(row pgx.Row) (*store.StreamChunk, error) {
	var (
		c    store.StreamChunk
		data []byte
	)
	if err := row.Scan(&c.SessionID, &c.TurnSeq, &c.Step, &c.Seq, &data, &c.CreatedAt); err != nil {
		return nil, err
	}
	c.Data, c.CreatedAt = rawOrNil(data), c.CreatedAt.UTC()
	return &c, nil
}

// AppendStreamChunk takes the next seq from the step's stream_heads row
// (the upsert locks it until commit, so appenders queue there) and inserts
// the chunk in the same statement. Zero CreatedAt becomes now.
func (s *Store) AppendStreamChunk(ctx context.Context, c *store.StreamChunk) (*store.StreamChunk, error) {
	if err := validateChunk(c); err != nil {
		return nil, err
	}
	created := c.CreatedAt
	if created.IsZero() {
		created = s.clock()
	}
	out, err := scanStreamChunk(s.pool.QueryRow(ctx, `WITH head AS (
			INSERT INTO stream_heads (session_id, turn_seq, step, last_seq) VALUES ($1, $2, $3, 1)
			ON CONFLICT (session_id, turn_seq, step) DO UPDATE SET last_seq = stream_heads.last_seq + 1
			RETURNING last_seq)
		INSERT INTO stream_chunks (session_id, turn_seq, step, seq, data, created_at)
		SELECT $1, $2, $3, last_seq, $4, $5 FROM head
		RETURNING `+streamChunkCols, c.SessionID, c.TurnSeq, c.Step, string(c.Data), created))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("append stream chunk of session %s", c.SessionID), err)
	}
	return out, nil
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

// ListStreamChunks lists one step's chunks in seq order.
func (s *Store) ListStreamChunks(ctx context.Context, sessionID string, turnSeq, step int64) ([]*store.StreamChunk, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+streamChunkCols+` FROM stream_chunks
		WHERE session_id = $1 AND turn_seq = $2 AND step = $3 ORDER BY seq`, sessionID, turnSeq, step)
	if err != nil {
		return nil, mapErr(fmt.Sprintf("list stream chunks of session %s", sessionID), err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.StreamChunk, error) { return scanStreamChunk(row) })
	if err != nil {
		return nil, mapErr(fmt.Sprintf("list stream chunks of session %s", sessionID), err)
	}
	if out == nil {
		out = []*store.StreamChunk{}
	}
	return out, nil
}

// DeleteStreamChunks drops the chunks, seq heads and partial blocks of turns up to and
// including upToTurnSeq, in one transaction.
func (s *Store) DeleteStreamChunks(ctx context.Context, sessionID string, upToTurnSeq int64) error {
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, `DELETE FROM stream_heads WHERE session_id = $1 AND turn_seq <= $2`,
			sessionID, upToTurnSeq); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM partial_blocks WHERE session_id = $1 AND turn_seq <= $2`,
			sessionID, upToTurnSeq); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, `DELETE FROM stream_chunks WHERE session_id = $1 AND turn_seq <= $2`,
			sessionID, upToTurnSeq)
		return err
	})
	return mapErr(fmt.Sprintf("delete stream chunks of session %s", sessionID), err)
}
