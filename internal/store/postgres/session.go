package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// CreateSession inserts a new active session at version 1. The primary key
// settles concurrent creators: exactly one insert wins, the others get
// ErrAlreadyExists.
func (s *Store) CreateSession(ctx context.Context, p store.CreateSessionParams) (*store.Session, error) {
	if p.ID == "" {
		p.ID = ids.New("sesn")
	}
	custom, err := objectArg("CustomState", p.CustomState)
	if err != nil {
		return nil, err
	}
	runtime, err := objectArg("Runtime", p.Runtime)
	if err != nil {
		return nil, err
	}
	metadata, err := metadataArg(p.Metadata)
	if err != nil {
		return nil, err
	}
	tags, err := tagsArg(p.Tags)
	if err != nil {
		return nil, err
	}
	now := s.clock()
	r, err := scanSession(s.pool.QueryRow(ctx, `INSERT INTO sessions
		(id, tenant_id, agent_type, status, custom_state, runtime, parent_session_id,
		 root_session_id, metadata, tags, expires_at, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $12)
		RETURNING `+sessionCols,
		p.ID, p.TenantID, p.AgentType, string(store.StatusActive), custom, runtime,
		p.ParentSessionID, p.RootSessionID, metadata, tags, p.ExpiresAt, now))
	if err != nil {
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("create session %s: %w", p.ID, store.ErrAlreadyExists)
		}
		return nil, mapErr(fmt.Sprintf("create session %s", p.ID), err)
	}
	return &r.Session, nil
}

// GetSession returns the session or ErrNotFound.
func (s *Store) GetSession(ctx context.Context, id string) (*store.Session, error) {
	r, err := getSession(ctx, s.pool, id, false)
	if err != nil {
		return nil, err
	}
	return &r.Session, nil
}

// SessionExists reports whether the session exists.
func (s *Store) SessionExists(ctx context.Context, id string) (bool, error) {
	var ok bool
	err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1)", id).Scan(&ok)
	if err != nil {
		return false, mapErr(fmt.Sprintf("session %s: exists", id), err)
	}
	return ok, nil
}

// ListSessions pages through a tenant's sessions newest first, keyed on
// (created_at, id). An AfterID that is not one of the tenant's sessions is
// ErrNotFound rather than an empty page.
func (s *Store) ListSessions(ctx context.Context, p store.ListSessionsParams) ([]*store.Session, error) {
	var limit *int
	if p.Limit > 0 {
		limit = &p.Limit
	}
	if p.AfterID != "" {
		var ok bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM sessions WHERE id = $1 AND tenant_id = $2)",
			p.AfterID, p.TenantID).Scan(&ok); err != nil {
			return nil, mapErr("list sessions", err)
		}
		if !ok {
			return nil, fmt.Errorf("list sessions: cursor session %s: %w", p.AfterID, store.ErrNotFound)
		}
	}
	rows, err := s.pool.Query(ctx, "SELECT "+sessionCols+` FROM sessions
		WHERE tenant_id = $1
		  AND ($2::text = '' OR (created_at, id) <
		       (SELECT created_at, id FROM sessions WHERE id = $2))
		ORDER BY created_at DESC, id DESC LIMIT $3`, p.TenantID, p.AfterID, limit)
	if err != nil {
		return nil, mapErr("list sessions", err)
	}
	defer rows.Close()
	var out []*store.Session
	for rows.Next() {
		r, err := scanSession(rows)
		if err != nil {
			return nil, mapErr("list sessions", err)
		}
		out = append(out, &r.Session)
	}
	return out, mapErr("list sessions", rows.Err())
}

// DeleteSession removes the session; messages, runs, checkpoints and refs go
// with it by cascade, staged changes explicitly (they have no foreign key).
func (s *Store) DeleteSession(ctx context.Context, id string) error {
	var n int
	err := s.pool.QueryRow(ctx, `WITH d AS (DELETE FROM sessions WHERE id = $1 RETURNING id),
		st AS (DELETE FROM staged_changes WHERE session_id IN (SELECT id FROM d))
		SELECT count(*) FROM d`, id).Scan(&n)
	if err != nil {
		return mapErr(fmt.Sprintf("delete session %s", id), err)
	}
	if n == 0 {
		return fmt.Errorf("delete session %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// DeleteExpiredSessions removes sessions whose ExpiresAt is before now.
func (s *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, `WITH d AS (DELETE FROM sessions WHERE expires_at < $1 RETURNING id),
		st AS (DELETE FROM staged_changes WHERE session_id IN (SELECT id FROM d))
		SELECT count(*) FROM d`, now).Scan(&n)
	if err != nil {
		return 0, mapErr("delete expired sessions", err)
	}
	return n, nil
}

// CloneSession copies a session (or, with CheckpointID, the state and
// messages of one of its checkpoints) into a new session at version 1.
func (s *Store) CloneSession(ctx context.Context, p store.CloneSessionParams) (*store.Session, error) {
	if p.FromID == "" {
		return nil, fmt.Errorf("clone session: FromID is required: %w", store.ErrInvalid)
	}
	if p.NewID == "" {
		p.NewID = ids.New("sesn")
	}
	op := fmt.Sprintf("clone session %s to %s", p.FromID, p.NewID)
	var out *store.Session
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		// FOR SHARE keeps appends and truncation out while messages are copied.
		src, err := scanSession(tx.QueryRow(ctx, "SELECT "+sessionCols+" FROM sessions WHERE id = $1 FOR SHARE", p.FromID))
		if err != nil {
			return mapErr(op, err)
		}
		state, upTo := stateOf(&src.Session), src.messageCount
		if p.CheckpointID != "" {
			cp, err := getCheckpoint(ctx, tx, p.FromID, p.CheckpointID)
			if err != nil {
				return err
			}
			state, upTo = cp.State, min(cp.MessageCount, src.messageCount)
		}
		tenant := p.TenantID
		if tenant == "" {
			tenant = src.TenantID
		}
		a, err := validateState(state)
		if err != nil {
			return err
		}
		now := s.clock()
		r, err := scanSession(tx.QueryRow(ctx, `INSERT INTO sessions
			(id, tenant_id, agent_type, status, step_count, custom_state, runtime, error,
			 failure_reason, interrupt_context, metadata, tags, expires_at, message_count,
			 parent_session_id, root_session_id, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17, $17)
			RETURNING `+sessionCols,
			p.NewID, tenant, src.AgentType, a.status, state.StepCount, a.custom, a.runtime, state.Error,
			state.FailureReason, a.ictx, a.metadata, a.tags, state.ExpiresAt, upTo,
			src.ParentSessionID, src.RootSessionID, now))
		if err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("%s: %w", op, store.ErrAlreadyExists)
			}
			return mapErr(op, err)
		}
		// Seqs are dense from 1, so seq <= upTo is exactly the first upTo.
		if _, err := tx.Exec(ctx, `INSERT INTO messages (session_id, seq, role, content, created_at)
			SELECT $1, seq, role, content, created_at FROM messages
			WHERE session_id = $2 AND seq <= $3`, p.NewID, p.FromID, upTo); err != nil {
			return mapErr(op+": copy messages", err)
		}
		out = &r.Session
		return nil
	})
	if err != nil {
		return nil, mapErr(op, err)
	}
	return out, nil
}
