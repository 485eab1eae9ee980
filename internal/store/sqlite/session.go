package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// CreateSession inserts with ON CONFLICT DO NOTHING, so of N concurrent
// creators exactly one gets the row back and the rest ErrAlreadyExists.
func (s *Store) CreateSession(ctx context.Context, p store.CreateSessionParams) (*store.Session, error) {
	if p.ID == "" {
		p.ID = ids.New("sesn")
	}
	enc, err := encodeState(store.SessionState{
		Status: store.StatusActive, CustomState: p.CustomState, Runtime: p.Runtime,
		Metadata: p.Metadata, Tags: p.Tags, ExpiresAt: p.ExpiresAt,
	})
	if err != nil {
		return nil, err
	}
	now := micros(s.timestamp())
	row := s.write.QueryRowContext(ctx, `INSERT INTO sessions (id, tenant_id, agent_type, status, version,
		custom_state, runtime, parent_session_id, root_session_id, metadata, tags, expires_at, created_at, updated_at)
		VALUES (?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING RETURNING `+sessionCols,
		p.ID, p.TenantID, p.AgentType, enc.status, enc.custom, enc.runtime, p.ParentSessionID, p.RootSessionID,
		enc.metadata, enc.tags, enc.expiresAt, now, now)
	sess, err := scanSession(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", p.ID, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: create session %q: %w", p.ID, err)
	}
	return sess, nil
}

// GetSession implements store.SessionStore.
func (s *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	return loadSession(ctx, s.read, id)
}

// SessionExists implements store.SessionStore.
func (s *Store) SessionExists(ctx context.Context, id string) (bool, error) {
	err := requireSession(ctx, s.read, id)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	return err == nil, err
}

// SaveState implements store.SessionStore.
func (s *Store) SaveState(ctx context.Context, p store.SaveStateParams) (*store.Session, error) {
	enc, err := encodeState(p.State)
	if err != nil {
		return nil, err
	}
	var out *store.Session
	err = s.inTx(ctx, func(tx *wtx) error {
		if err := checkVersion(ctx, tx, p.SessionID, p.ExpectedVersion); err != nil {
			return err
		}
		sess, err := s.writeState(ctx, tx, p.SessionID, enc, p.State.StepCount)
		if err != nil {
			return err
		}
		if p.Checkpoint != nil {
			if _, err := s.writeCheckpoint(ctx, tx, sess, *p.Checkpoint, store.CheckpointSourceSave); err != nil {
				return err
			}
		}
		out = sess
		return nil
	})
	return out, err
}

// checkVersion fails with *StaleStateError when expected is set and differs.
func checkVersion(ctx context.Context, tx *wtx, id string, expected *int64) error {
	var current int64
	err := tx.QueryRowContext(ctx, `SELECT version FROM sessions WHERE id = ?`, id).Scan(&current)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return fmt.Errorf("sqlite: read version of %q: %w", id, err)
	}
	if expected != nil && *expected != current {
		return &store.StaleStateError{SessionID: id, ExpectedVersion: *expected, CurrentVersion: current}
	}
	return nil
}

// writeState overwrites the writable state and bumps the version once.
func (s *Store) writeState(ctx context.Context, tx *wtx, id string, e encodedState, stepCount int64) (*store.Session, error) {
	row := tx.QueryRowContext(ctx, `UPDATE sessions SET status = ?, custom_state = ?, runtime = ?, step_count = ?,
		error = ?, failure_reason = ?, interrupt_context = ?, metadata = ?, tags = ?, expires_at = ?,
		version = version + 1, updated_at = ? WHERE id = ? RETURNING `+sessionCols,
		e.status, e.custom, e.runtime, stepCount, e.errText, e.failureReason, e.interruptCtx,
		e.metadata, e.tags, e.expiresAt, micros(s.timestamp()), id)
	sess, err := scanSession(row)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: save state of %q: %w", id, err)
	}
	return sess, nil
}

// MergeCustomState implements store.SessionStore.
func (s *Store) MergeCustomState(ctx context.Context, id string, patch json.RawMessage) (int64, error) {
	var version int64
	err := s.inTx(ctx, func(tx *wtx) error {
		var custom string
		err := tx.QueryRowContext(ctx, `SELECT custom_state FROM sessions WHERE id = ?`, id).Scan(&custom)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read custom state of %q: %w", id, err)
		}
		merged, err := mergeTopLevel(custom, patch)
		if err != nil {
			return err
		}
		return tx.QueryRowContext(ctx, `UPDATE sessions SET custom_state = ?, version = version + 1, updated_at = ?
			WHERE id = ? RETURNING version`, merged, micros(s.timestamp()), id).Scan(&version)
	})
	return version, err
}

// IncrementStepCount implements store.SessionStore; returns the new count.
func (s *Store) IncrementStepCount(ctx context.Context, id string) (int64, error) {
	return s.increment(ctx, id, "step_count")
}

// IncrementResumeCount implements store.SessionStore; returns the new count.
func (s *Store) IncrementResumeCount(ctx context.Context, id string) (int64, error) {
	return s.increment(ctx, id, "resume_count")
}

// increment is one UPDATE, atomic on its own; col is one of two constants.
func (s *Store) increment(ctx context.Context, id, col string) (int64, error) {
	var n int64
	err := s.write.QueryRowContext(ctx, `UPDATE sessions SET `+col+` = `+col+` + 1, version = version + 1,
		updated_at = ? WHERE id = ? RETURNING `+col, micros(s.timestamp()), id).Scan(&n)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return 0, fmt.Errorf("sqlite: increment %s of %q: %w", col, id, err)
	}
	return n, nil
}
