package postgres

import (
	"context"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// SavePartialBlock implements store.OpStore: one upsert of the step's row.
func (s *Store) SavePartialBlock(ctx context.Context, b *store.PartialBlock) error {
	if b.Index < 0 {
		return fmt.Errorf("partial block of session %q: index %d must not be negative: %w", b.SessionID, b.Index, store.ErrInvalid)
	}
	if err := validateChunk(&store.StreamChunk{SessionID: b.SessionID, TurnSeq: b.TurnSeq, Step: b.Step, Data: b.Data}); err != nil {
		return err
	}
	at := b.UpdatedAt
	if at.IsZero() {
		at = s.clock()
	}
	_, err := s.pool.Exec(ctx, `INSERT INTO partial_blocks
		(session_id, turn_seq, step, block_index, data, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
		ON CONFLICT (session_id, turn_seq, step) DO UPDATE SET
		block_index = EXCLUDED.block_index, data = EXCLUDED.data, updated_at = EXCLUDED.updated_at`,
		b.SessionID, b.TurnSeq, b.Step, b.Index, string(b.Data), at)
	return mapErr(fmt.Sprintf("save partial block of session %s", b.SessionID), err)
}

// GetPartialBlock implements store.OpStore.
func (s *Store) GetPartialBlock(ctx context.Context, sessionID string, turnSeq, step int64) (*store.PartialBlock, error) {
	b := store.PartialBlock{SessionID: sessionID, TurnSeq: turnSeq, Step: step}
	var data []byte
	err := s.pool.QueryRow(ctx, `SELECT block_index, data, updated_at FROM partial_blocks
		WHERE session_id = $1 AND turn_seq = $2 AND step = $3`, sessionID, turnSeq, step).Scan(&b.Index, &data, &b.UpdatedAt)
	if err != nil {
		return nil, mapErr(fmt.Sprintf("partial block of session %s turn %d step %d", sessionID, turnSeq, step), err)
	}
	b.Data, b.UpdatedAt = rawOrNil(data), b.UpdatedAt.UTC()
	return &b, nil
}
