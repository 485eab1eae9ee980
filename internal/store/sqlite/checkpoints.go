package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// snapshot is the JSON form of a checkpoint's SessionState. omitempty keeps
// absent raw fields absent (a bare RawMessage would come back as "null").
type snapshot struct {
	Status           store.SessionStatus `json:"status"`
	CustomState      json.RawMessage     `json:"custom_state,omitempty"`
	Runtime          json.RawMessage     `json:"runtime,omitempty"`
	StepCount        int64               `json:"step_count"`
	Error            string              `json:"error,omitempty"`
	FailureReason    string              `json:"failure_reason,omitempty"`
	InterruptContext json.RawMessage     `json:"interrupt_context,omitempty"`
	Metadata         map[string]string   `json:"metadata,omitempty"`
	Tags             []string            `json:"tags,omitempty"`
	ExpiresAt        *time.Time          `json:"expires_at,omitempty"`
}

const checkpointCols = `id, session_id, step_count, message_count, version, run_id, source, state, metadata, workspace, created_at`

func scanCheckpoint(r scanner) (*store.Checkpoint, error) {
	var (
		cp       store.Checkpoint
		source   string
		state    string
		metadata sql.NullString
		created  int64
	)
	if err := r.Scan(&cp.ID, &cp.SessionID, &cp.StepCount, &cp.MessageCount, &cp.Version, &cp.RunID,
		&source, &state, &metadata, &cp.Workspace, &created); err != nil {
		return nil, err
	}
	var snap snapshot
	if err := json.Unmarshal([]byte(state), &snap); err != nil {
		return nil, fmt.Errorf("decode checkpoint %q state: %w", cp.ID, err)
	}
	cp.State = store.SessionState(snap)
	cp.Source = store.CheckpointSource(source)
	cp.Metadata = rawOrNil(metadata)
	cp.CreatedAt = fromMicros(created)
	return &cp, nil
}

// writeCheckpoint snapshots sess (already written in tx, carrying its new
// version) with the current message count, and moves the session's pointer.
// It does not bump the version again: it is part of the caller's change.
func (s *Store) writeCheckpoint(ctx context.Context, tx *wtx, sess *store.Session, meta store.CheckpointMeta,
	source store.CheckpointSource) (*store.Checkpoint, error) {
	var count int64
	// Seq is dense from 1, so the max is the count, read from the index
	// instead of scanning every message.
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?`, sess.ID).
		Scan(&count); err != nil {
		return nil, fmt.Errorf("sqlite: count messages of %q: %w", sess.ID, err)
	}
	now := s.timestamp()
	cp, err := s.insertCheckpoint(ctx, tx, sess, count, meta, source, now)
	if err != nil {
		return nil, err
	}
	if _, err := tx.ExecContext(ctx, `UPDATE sessions SET checkpoint_id = ?, checkpointed_at = ?,
		checkpoint_source = ? WHERE id = ?`, cp.ID, micros(now), string(source), sess.ID); err != nil {
		return nil, fmt.Errorf("sqlite: move checkpoint pointer of %q: %w", sess.ID, err)
	}
	sess.CheckpointID, sess.CheckpointedAt, sess.CheckpointSource = cp.ID, &now, source
	return cp, nil
}

// insertCheckpoint writes the checkpoint of sess at count messages; the
// caller moves the session's pointer to it.
func (s *Store) insertCheckpoint(ctx context.Context, tx *wtx, sess *store.Session, count int64, meta store.CheckpointMeta,
	source store.CheckpointSource, now time.Time) (*store.Checkpoint, error) {
	if meta.ID == "" {
		meta.ID = ids.New("cp")
	}
	metadata, err := jsonValue("checkpoint metadata", meta.Metadata)
	if err != nil {
		return nil, err
	}
	st := stateOf(sess)
	state, err := json.Marshal(snapshot(st))
	if err != nil {
		return nil, fmt.Errorf("sqlite: encode checkpoint state: %w", err)
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO checkpoints (id, session_id, step_count,
		message_count, version, run_id, source, state, metadata, workspace, created_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
		meta.ID, sess.ID, meta.StepCount, count, sess.Version, meta.RunID, string(source), string(state),
		metadata, meta.Workspace, micros(now))
	if err != nil {
		return nil, fmt.Errorf("sqlite: create checkpoint %q: %w", meta.ID, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, fmt.Errorf("checkpoint %q: %w", meta.ID, store.ErrAlreadyExists)
	}
	return &store.Checkpoint{ID: meta.ID, SessionID: sess.ID, StepCount: meta.StepCount, MessageCount: count,
		Version: sess.Version, RunID: meta.RunID, Source: source, State: st, Metadata: rawOrNil(metadata),
		Workspace: meta.Workspace, CreatedAt: now}, nil
}

// CreateCheckpoint implements store.CheckpointStore.
func (s *Store) CreateCheckpoint(ctx context.Context, sessionID string, meta store.CheckpointMeta) (*store.Checkpoint, error) {
	var cp *store.Checkpoint
	err := s.inTx(ctx, func(tx *wtx) error {
		if err := s.bumpVersion(ctx, tx, sessionID); err != nil {
			return err
		}
		sess, err := loadSession(ctx, tx, sessionID)
		if err != nil {
			return err
		}
		cp, err = s.writeCheckpoint(ctx, tx, sess, meta, store.CheckpointSourceSave)
		return err
	})
	return cp, err
}

// GetCheckpoint implements store.CheckpointStore.
func (s *Store) GetCheckpoint(ctx context.Context, sessionID, checkpointID string) (*store.Checkpoint, error) {
	cp, err := scanCheckpoint(s.read.QueryRowContext(ctx, `SELECT `+checkpointCols+` FROM checkpoints
		WHERE id = ? AND session_id = ?`, checkpointID, sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("checkpoint %q of session %q: %w", checkpointID, sessionID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get checkpoint %q: %w", checkpointID, err)
	}
	return cp, nil
}

// GetLatestCheckpoint resolves the session's pointer and, in the same
// statement (one snapshot), the newest checkpoint by creation order as the
// fallback for an absent or dangling pointer. Both arms are index lookups,
// however many checkpoints the session has.
func (s *Store) GetLatestCheckpoint(ctx context.Context, sessionID string) (*store.Checkpoint, error) {
	cp, err := scanCheckpoint(s.read.QueryRowContext(ctx, `SELECT `+checkpointCols+` FROM (
			SELECT 1 AS pref, `+checkpointCols+` FROM checkpoints
			WHERE session_id = ?1 AND id = (SELECT checkpoint_id FROM sessions WHERE id = ?1)
			UNION ALL
			SELECT * FROM (SELECT 0 AS pref, `+checkpointCols+` FROM checkpoints
				WHERE session_id = ?1 ORDER BY ord DESC LIMIT 1)
		) ORDER BY pref DESC LIMIT 1`, sessionID))
	if errors.Is(err, sql.ErrNoRows) {
		if err := requireSession(ctx, s.read, sessionID); err != nil {
			return nil, err
		}
		return nil, fmt.Errorf("session %q has no checkpoint: %w", sessionID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: latest checkpoint of %q: %w", sessionID, err)
	}
	return cp, nil
}

// ListCheckpoints implements store.CheckpointStore.
func (s *Store) ListCheckpoints(ctx context.Context, sessionID string) ([]*store.Checkpoint, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+checkpointCols+` FROM checkpoints WHERE session_id = ?
		ORDER BY ord`, sessionID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list checkpoints of %q: %w", sessionID, err)
	}
	defer rows.Close()
	var out []*store.Checkpoint
	for rows.Next() {
		cp, err := scanCheckpoint(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan checkpoint: %w", err)
		}
		out = append(out, cp)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: list checkpoints of %q: %w", sessionID, err)
	}
	if len(out) == 0 {
		return nil, requireSession(ctx, s.read, sessionID)
	}
	return out, nil
}
