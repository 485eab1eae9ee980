package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// SavePartialBlock implements store.OpStore: one upsert of the step's row.
func (s *Store) SavePartialBlock(ctx context.Context, b *store.PartialBlock) error {
	if err := validatePartial(b); err != nil {
		return err
	}
	at := b.UpdatedAt
	if at.IsZero() {
		at = s.timestamp()
	}
	if _, err := s.write.ExecContext(ctx, `INSERT INTO partial_blocks
		(session_id, turn_seq, step, block_index, data, updated_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)
		ON CONFLICT (session_id, turn_seq, step) DO UPDATE SET
		block_index = excluded.block_index, data = excluded.data, updated_at = excluded.updated_at`,
		b.SessionID, b.TurnSeq, b.Step, b.Index, string(b.Data), micros(at)); err != nil {
		return fmt.Errorf("sqlite: save partial block of session %q: %w", b.SessionID, err)
	}
	return nil
}

// validatePartial checks what SavePartialBlock writes.
func validatePartial(b *store.PartialBlock) error {
	if b.Index < 0 {
		return fmt.Errorf("partial block of session %q: index %d must not be negative: %w", b.SessionID, b.Index, store.ErrInvalid)
	}
	return validateChunk(&store.StreamChunk{SessionID: b.SessionID, TurnSeq: b.TurnSeq, Step: b.Step, Data: b.Data})
}

// GetPartialBlock implements store.OpStore.
func (s *Store) GetPartialBlock(ctx context.Context, sessionID string, turnSeq, step int64) (*store.PartialBlock, error) {
	b := store.PartialBlock{SessionID: sessionID, TurnSeq: turnSeq, Step: step}
	var (
		data string
		at   int64
	)
	err := s.read.QueryRowContext(ctx, `SELECT block_index, data, updated_at FROM partial_blocks
		WHERE session_id = ? AND turn_seq = ? AND step = ?`, sessionID, turnSeq, step).Scan(&b.Index, &data, &at)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("partial block of session %q turn %d step %d: %w", sessionID, turnSeq, step, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: read partial block of session %q: %w", sessionID, err)
	}
	b.Data, b.UpdatedAt = json.RawMessage(data), fromMicros(at)
	return &b, nil
}
