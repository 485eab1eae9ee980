package postgres

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// mSessionArgs are a managed session's validated JSON arguments.
type mSessionArgs struct {
	doc               string
	usage, stopReason any
}

// validateManagedSession checks the fields a create or update writes. A JSON
// null Usage or StopReason is stored as NULL and reads back nil.
func validateManagedSession(m *store.ManagedSession) (mSessionArgs, error) {
	var (
		a   mSessionArgs
		err error
	)
	if m.ProcessedSeq < 0 {
		return a, fmt.Errorf("session %s: ProcessedSeq %d is negative: %w", m.ID, m.ProcessedSeq, store.ErrInvalid)
	}
	if a.doc, err = objectArg("session "+m.ID+": Doc", m.Doc); err != nil {
		return a, err
	}
	if a.usage, err = jsonArg("session "+m.ID+": Usage", nullToNil(m.Usage)); err != nil {
		return a, err
	}
	if a.stopReason, err = jsonArg("session "+m.ID+": StopReason", nullToNil(m.StopReason)); err != nil {
		return a, err
	}
	return a, nil
}

// CreateManagedSession inserts a session at version 1 with no events. Zero
// CreatedAt becomes now; zero UpdatedAt becomes CreatedAt.
func (s *Store) CreateManagedSession(ctx context.Context, m *store.ManagedSession) (*store.ManagedSession, error) {
	in := *m
	if in.ID == "" {
		in.ID = ids.New("sesn")
	}
	a, err := validateManagedSession(&in)
	if err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.clock()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	out, err := scanManagedSession(s.pool.QueryRow(ctx, `INSERT INTO managed_sessions
		(id, tenant_id, agent_id, agent_version, environment_id, doc, sandbox_id, usage,
		 processed_seq, stop_reason, terminated_at, archived_at, last_seq, version, created_at, updated_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, 0, 1, $13, $14) RETURNING `+mSessionCols,
		in.ID, in.TenantID, in.AgentID, in.AgentVersion, in.EnvironmentID, a.doc, in.SandboxID, a.usage,
		in.ProcessedSeq, a.stopReason, in.TerminatedAt, in.ArchivedAt, in.CreatedAt, in.UpdatedAt))
	if err != nil {
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("create session %s: %w", in.ID, store.ErrAlreadyExists)
		}
		return nil, mapErr("create session "+in.ID, err)
	}
	return out, nil
}

// GetManagedSession returns the session or ErrNotFound.
func (s *Store) GetManagedSession(ctx context.Context, id string) (*store.ManagedSession, error) {
	m, err := scanManagedSession(s.pool.QueryRow(ctx, `SELECT `+mSessionCols+` FROM managed_sessions WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("session "+id, err)
	}
	return m, nil
}

// UpdateManagedSession is one compare-and-set UPDATE: under READ COMMITTED
// a concurrent writer waits for the row lock and re-checks the version
// against the committed row, so exactly one writer per version wins.
// AppendEvents only moves last_seq, so it never makes this fail.
func (s *Store) UpdateManagedSession(ctx context.Context, m *store.ManagedSession) (*store.ManagedSession, error) {
	a, err := validateManagedSession(m)
	if err != nil {
		return nil, err
	}
	out, err := scanManagedSession(s.pool.QueryRow(ctx, `UPDATE managed_sessions SET
		doc = $3, sandbox_id = $4, usage = $5, processed_seq = $6, stop_reason = $7,
		terminated_at = $8, archived_at = $9, version = version + 1, updated_at = $10
		WHERE id = $1 AND version = $2 RETURNING `+mSessionCols,
		m.ID, m.Version, a.doc, m.SandboxID, a.usage, m.ProcessedSeq, a.stopReason,
		m.TerminatedAt, m.ArchivedAt, s.clock()))
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapErr("update session "+m.ID, err)
	}
	// No row matched: tell a missing session from a stale version.
	var current int64
	if err := s.pool.QueryRow(ctx, `SELECT version FROM managed_sessions WHERE id = $1`, m.ID).Scan(&current); err != nil {
		return nil, mapErr("update session "+m.ID, err)
	}
	return nil, fmt.Errorf("update session %s: expected version %d, current version %d: %w",
		m.ID, m.Version, current, store.ErrVersionMismatch)
}

// ListManagedSessions pages through a tenant's sessions by id, optionally
// of one agent.
func (s *Store) ListManagedSessions(ctx context.Context, p store.ListResourcesParams) ([]*store.ManagedSession, error) {
	where, tail, page := resourcePage(p, 4)
	rows, err := s.pool.Query(ctx, `SELECT `+mSessionCols+` FROM managed_sessions
		WHERE tenant_id = $1 AND ($2::text = '' OR agent_id = $2) AND ($3::boolean OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.AgentID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, mapErr("list sessions", err)
	}
	return collect(rows, "sessions", scanManagedSession)
}

// DeleteManagedSession removes the session; ON DELETE CASCADE removes its
// events and run row in the same statement.
func (s *Store) DeleteManagedSession(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM managed_sessions WHERE id = $1`, id)
	if err != nil {
		return mapErr("delete session "+id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete session %s: %w", id, store.ErrNotFound)
	}
	return nil
}
