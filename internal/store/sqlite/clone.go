package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// CloneSession implements store.SessionStore. With a checkpoint it is a
// branch: the state is the checkpoint's snapshot and exactly the first
// MessageCount messages are copied, all in one transaction. Runs, staging,
// checkpoints and the interrupt flag stay with the source; the new session
// starts at version 1 with no checkpoint pointer.
func (s *Store) CloneSession(ctx context.Context, p store.CloneSessionParams) (*store.Session, error) {
	if err := requireID("source session id", p.FromID); err != nil {
		return nil, err
	}
	if p.NewID == "" {
		p.NewID = ids.New("sesn")
	}
	var out *store.Session
	err := s.inTx(ctx, func(tx *wtx) error {
		src, err := loadSession(ctx, tx, p.FromID)
		if err != nil {
			return err
		}
		state := stateOf(src)
		msgLimit := int64(-1) // all
		if p.CheckpointID != "" {
			cp, err := scanCheckpoint(tx.QueryRowContext(ctx, `SELECT `+checkpointCols+` FROM checkpoints
				WHERE id = ? AND session_id = ?`, p.CheckpointID, p.FromID))
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("checkpoint %q of session %q: %w", p.CheckpointID, p.FromID, store.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("sqlite: read checkpoint %q: %w", p.CheckpointID, err)
			}
			state, msgLimit = cp.State, cp.MessageCount
		}
		enc, err := encodeState(state)
		if err != nil {
			return err
		}
		tenant := p.TenantID
		if tenant == "" {
			tenant = src.TenantID
		}
		now := micros(s.timestamp())
		row := tx.QueryRowContext(ctx, `INSERT INTO sessions (id, tenant_id, agent_type, status, step_count,
			resume_count, version, custom_state, runtime, error, failure_reason, interrupt_context,
			parent_session_id, root_session_id, metadata, tags, expires_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, 0, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT (id) DO NOTHING RETURNING `+sessionCols,
			p.NewID, tenant, src.AgentType, enc.status, state.StepCount, enc.custom, enc.runtime,
			enc.errText, enc.failureReason, enc.interruptCtx, src.ParentSessionID, src.RootSessionID,
			enc.metadata, enc.tags, enc.expiresAt, now, now)
		out, err = scanSession(row)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session %q: %w", p.NewID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: create clone %q: %w", p.NewID, err)
		}
		// Seq is copied as is: the source's Seqs are dense from 1, so the
		// first MessageCount of them are exactly Seq 1..MessageCount.
		_, err = tx.ExecContext(ctx, `INSERT INTO messages (session_id, seq, role, content, created_at)
			SELECT ?, seq, role, content, created_at FROM messages WHERE session_id = ?
			ORDER BY seq LIMIT ?`, p.NewID, p.FromID, msgLimit)
		if err != nil {
			return fmt.Errorf("sqlite: copy messages to %q: %w", p.NewID, err)
		}
		return nil
	})
	return out, err
}
