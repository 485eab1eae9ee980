package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const checkpointCols = `id, session_id, step_count, message_count, version, run_id, source, state, metadata, workspace, created_at`

func scanCheckpoint(row pgx.Row) (*store.Checkpoint, error) {
	var (
		c               store.Checkpoint
		source          string
		state, metadata []byte
	)
	if err := row.Scan(&c.ID, &c.SessionID, &c.StepCount, &c.MessageCount, &c.Version, &c.RunID,
		&source, &state, &metadata, &c.Workspace, &c.CreatedAt); err != nil {
		return nil, err
	}
	c.Source = store.CheckpointSource(source)
	c.Metadata = rawOrNil(metadata)
	c.CreatedAt = c.CreatedAt.UTC()
	if err := json.Unmarshal(state, &c.State); err != nil {
		return nil, fmt.Errorf("checkpoint %s: decode state: %w", c.ID, err)
	}
	c.State.ExpiresAt = utcPtr(c.State.ExpiresAt)
	c.State.CustomState = nullToNil(c.State.CustomState)
	c.State.Runtime = nullToNil(c.State.Runtime)
	c.State.InterruptContext = nullToNil(c.State.InterruptContext)
	return &c, nil
}

// insertCheckpoint snapshots r (the session as the current transaction left
// it) under meta.ID. The caller has already moved the pointer.
func insertCheckpoint(ctx context.Context, tx pgx.Tx, r *sessionRow, meta store.CheckpointMeta, source store.CheckpointSource, now time.Time) (*store.Checkpoint, error) {
	op := fmt.Sprintf("session %s: create checkpoint %s", r.ID, meta.ID)
	metadata, err := jsonArg("checkpoint Metadata", meta.Metadata)
	if err != nil {
		return nil, err
	}
	state, err := json.Marshal(stateOf(&r.Session))
	if err != nil {
		return nil, fmt.Errorf("%s: encode state: %w", op, err)
	}
	c, err := scanCheckpoint(tx.QueryRow(ctx, `INSERT INTO checkpoints
		(id, session_id, step_count, message_count, version, run_id, source, state, metadata, workspace, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) RETURNING `+checkpointCols,
		meta.ID, r.ID, meta.StepCount, r.messageCount, r.Version, meta.RunID, string(source),
		string(state), metadata, meta.Workspace, now))
	if err != nil {
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("%s: %w", op, store.ErrAlreadyExists)
		}
		return nil, mapErr(op, err)
	}
	return c, nil
}

// CreateCheckpoint snapshots the current state and message count, moves the
// pointer to the new checkpoint and bumps the version, in one transaction.
func (s *Store) CreateCheckpoint(ctx context.Context, sessionID string, meta store.CheckpointMeta) (*store.Checkpoint, error) {
	if meta.ID == "" {
		meta.ID = ids.New("cp")
	}
	if _, err := jsonArg("checkpoint Metadata", meta.Metadata); err != nil {
		return nil, err
	}
	var out *store.Checkpoint
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		now := s.clock()
		r, err := scanSession(tx.QueryRow(ctx, `UPDATE sessions SET version = version + 1, updated_at = $2,
			checkpoint_id = $3, checkpointed_at = $2, checkpoint_source = $4
			WHERE id = $1 RETURNING `+sessionCols, sessionID, now, meta.ID, string(store.CheckpointSourceSave)))
		if err != nil {
			return err
		}
		out, err = insertCheckpoint(ctx, tx, r, meta, store.CheckpointSourceSave, now)
		return err
	})
	if err != nil {
		return nil, mapErr(fmt.Sprintf("session %s: create checkpoint", sessionID), err)
	}
	return out, nil
}

func getCheckpoint(ctx context.Context, q querier, sessionID, checkpointID string) (*store.Checkpoint, error) {
	c, err := scanCheckpoint(q.QueryRow(ctx, "SELECT "+checkpointCols+
		" FROM checkpoints WHERE session_id = $1 AND id = $2", sessionID, checkpointID))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("session %s: checkpoint %s", sessionID, checkpointID), err)
	}
	return c, nil
}

// GetCheckpoint returns one checkpoint of the session.
func (s *Store) GetCheckpoint(ctx context.Context, sessionID, checkpointID string) (*store.Checkpoint, error) {
	return getCheckpoint(ctx, s.pool, sessionID, checkpointID)
}

// GetLatestCheckpoint resolves the session's checkpoint pointer; only when
// it is absent or dangling does it fall back to the newest created, because
// StepCount restarts every turn and cannot order checkpoints.
func (s *Store) GetLatestCheckpoint(ctx context.Context, sessionID string) (*store.Checkpoint, error) {
	c, err := scanCheckpoint(s.pool.QueryRow(ctx, "SELECT "+checkpointCols+` FROM checkpoints c
		WHERE c.session_id = $1
		ORDER BY c.id = (SELECT checkpoint_id FROM sessions WHERE id = $1) DESC NULLS LAST, c.ord DESC
		LIMIT 1`, sessionID))
	if errors.Is(err, pgx.ErrNoRows) {
		if err := requireSession(ctx, s.pool, sessionID); err != nil {
			return nil, err
		}
	}
	if err != nil {
		return nil, mapErr(fmt.Sprintf("session %s: latest checkpoint", sessionID), err)
	}
	return c, nil
}

// ListCheckpoints returns the session's checkpoints in creation order.
func (s *Store) ListCheckpoints(ctx context.Context, sessionID string) ([]*store.Checkpoint, error) {
	op := fmt.Sprintf("session %s: list checkpoints", sessionID)
	rows, err := s.pool.Query(ctx, "SELECT "+checkpointCols+
		" FROM checkpoints WHERE session_id = $1 ORDER BY ord", sessionID)
	if err != nil {
		return nil, mapErr(op, err)
	}
	defer rows.Close()
	var out []*store.Checkpoint
	for rows.Next() {
		c, err := scanCheckpoint(rows)
		if err != nil {
			return nil, mapErr(op, err)
		}
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, mapErr(op, err)
	}
	if len(out) == 0 {
		return nil, requireSession(ctx, s.pool, sessionID)
	}
	return out, nil
}
