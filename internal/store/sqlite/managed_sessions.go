package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// mSessionArgs are a managed session's validated JSON and time arguments.
type mSessionArgs struct {
	doc                  string
	usage, stopReason    sql.NullString
	terminated, archived sql.NullInt64
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
	if a.doc, err = jsonObject("session "+m.ID+": Doc", m.Doc, "{}"); err != nil {
		return a, err
	}
	if a.usage, err = jsonValue("session "+m.ID+": Usage", nullToNil(m.Usage)); err != nil {
		return a, err
	}
	if a.stopReason, err = jsonValue("session "+m.ID+": StopReason", nullToNil(m.StopReason)); err != nil {
		return a, err
	}
	a.terminated, a.archived = nullMicros(m.TerminatedAt), nullMicros(m.ArchivedAt)
	return a, nil
}

// CreateManagedSession implements store.ManagedStore: version 1, no events.
// Zero CreatedAt becomes now; zero UpdatedAt becomes CreatedAt.
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
		in.CreatedAt = s.timestamp()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	out, err := scanManagedSession(s.write.QueryRowContext(ctx, `INSERT INTO managed_sessions
		(id, tenant_id, agent_id, agent_version, environment_id, doc, sandbox_id, usage,
		 processed_seq, stop_reason, terminated_at, archived_at, last_seq, version, created_at, updated_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 1, ?, ?)
		ON CONFLICT DO NOTHING RETURNING `+mSessionCols,
		in.ID, in.TenantID, in.AgentID, in.AgentVersion, in.EnvironmentID, a.doc, in.SandboxID, a.usage,
		in.ProcessedSeq, a.stopReason, a.terminated, a.archived, micros(in.CreatedAt), micros(in.UpdatedAt)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", in.ID, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: create session %q: %w", in.ID, err)
	}
	return out, nil
}

// GetManagedSession implements store.ManagedStore.
func (s *Store) GetManagedSession(ctx context.Context, id string) (*store.ManagedSession, error) {
	m, err := scanManagedSession(s.read.QueryRowContext(ctx, `SELECT `+mSessionCols+` FROM managed_sessions WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get session %q: %w", id, err)
	}
	return m, nil
}

// UpdateManagedSession implements store.ManagedStore as a compare-and-set
// UPDATE on the one write connection; the version read that tells a stale
// version from a missing session runs in the same transaction. Appending
// events does not change the version, so it never fails this.
func (s *Store) UpdateManagedSession(ctx context.Context, m *store.ManagedSession) (*store.ManagedSession, error) {
	a, err := validateManagedSession(m)
	if err != nil {
		return nil, err
	}
	var out *store.ManagedSession
	err = s.inTx(ctx, func(tx *wtx) error {
		row, err := scanManagedSession(tx.QueryRowContext(ctx, `UPDATE managed_sessions SET
			doc = ?, sandbox_id = ?, usage = ?, processed_seq = ?, stop_reason = ?,
			terminated_at = ?, archived_at = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND version = ? RETURNING `+mSessionCols,
			a.doc, m.SandboxID, a.usage, m.ProcessedSeq, a.stopReason,
			a.terminated, a.archived, micros(s.timestamp()), m.ID, m.Version))
		if err == nil {
			out = row
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: update session %q: %w", m.ID, err)
		}
		var current int64
		err = tx.QueryRowContext(ctx, `SELECT version FROM managed_sessions WHERE id = ?`, m.ID).Scan(&current)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session %q: %w", m.ID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read version of session %q: %w", m.ID, err)
		}
		return fmt.Errorf("update session %q: expected version %d, current version %d: %w",
			m.ID, m.Version, current, store.ErrVersionMismatch)
	})
	return out, err
}

// ListManagedSessions implements store.ManagedStore.
func (s *Store) ListManagedSessions(ctx context.Context, p store.ListResourcesParams) ([]*store.ManagedSession, error) {
	where, tail, page := resourcePage(p, 4)
	rows, err := s.read.QueryContext(ctx, `SELECT `+mSessionCols+` FROM managed_sessions
		WHERE tenant_id = ?1 AND (?2 = '' OR agent_id = ?2) AND (?3 OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.AgentID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	return collect(rows, "sessions", scanManagedSession)
}

// DeleteManagedSession implements store.ManagedStore: the foreign keys'
// ON DELETE CASCADE removes the events and the run row in the same
// statement.
func (s *Store) DeleteManagedSession(ctx context.Context, id string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM managed_sessions WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete session %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	return nil
}
