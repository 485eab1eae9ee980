package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// A Managed Agents session is a row of sessions with kind 'managed' (one
// session model, issue 13): the seed-004 columns hold its version,
// checkpoint pointer and interrupt flag, the managed columns its document
// and the facts its status is derived from.

// kindManaged marks Managed Agents sessions in sessions.kind.
const kindManaged = "managed"

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
	out, _, _, err := s.CreateManagedSessionWith(ctx, store.NewManagedSession{Session: *m})
	return out, err
}

// CreateManagedSessionWith implements store.BranchStore: the session row,
// its resources and its initial events in one transaction.
func (s *Store) CreateManagedSessionWith(ctx context.Context, p store.NewManagedSession) (*store.ManagedSession, []store.SessionEvent, []*store.SessionResource, error) {
	in := p.Session
	if in.ID == "" {
		in.ID = ids.New("sesn")
	}
	a, err := validateManagedSession(&in)
	if err != nil {
		return nil, nil, nil, err
	}
	rows, err := validateEvents(in.ID, p.Events)
	if err != nil {
		return nil, nil, nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	var (
		out *store.ManagedSession
		evs []store.SessionEvent
		rs  []*store.SessionResource
	)
	err = s.inTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `INSERT INTO sessions
			(id, tenant_id, kind, status, version, custom_state, runtime, agent_id, agent_version, environment_id,
			 doc, sandbox_id, usage, processed_seq, stop_reason, terminated_at, archived_at, workspace_seed,
			 thread_of, created_at, updated_at)
			VALUES (?, ?, 'managed', 'active', 1, '{}', '{}', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING`,
			in.ID, in.TenantID, in.AgentID, in.AgentVersion, in.EnvironmentID, a.doc, in.SandboxID, a.usage,
			in.ProcessedSeq, a.stopReason, a.terminated, a.archived, in.Lineage.WorkspaceSeed,
			in.ThreadOf, micros(in.CreatedAt), micros(in.UpdatedAt))
		if err != nil {
			return fmt.Errorf("sqlite: create session %q: %w", in.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("session %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if in.ThreadOf == "" {
			// A thread is announced by its parent's session.thread_created.
			if err := s.enqueueWebhooksTx(ctx, tx, in.TenantID, in.ID, []webhookEvent{
				{typ: store.WebhookSessionCreated, resource: in.ID, at: in.CreatedAt}}); err != nil {
				return err
			}
		}
		if len(rows) > 0 {
			// The session's version stays 1: its creation is one
			// modification, events included.
			if evs, err = s.insertEventsTx(ctx, tx, s.timestamp(), in.ID, 0, rows); err != nil {
				return err
			}
		}
		if rs, err = s.createResourcesTx(ctx, tx, p.Resources); err != nil {
			return err
		}
		out, err = getManagedSession(ctx, tx, in.ID, s.timestamp())
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return out, evs, rs, nil
}

// getManagedSession reads one Managed Agents session (a branch too).
func getManagedSession(ctx context.Context, q querier, id string, now time.Time) (*store.ManagedSession, error) {
	m, err := scanManagedSession(q.QueryRowContext(ctx, `SELECT `+mSessionCols+mSessionFrom+`
		WHERE s.id = ? AND s.kind = 'managed'`, id), now)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("session %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get session %q: %w", id, err)
	}
	return m, nil
}

// GetManagedSession implements store.ManagedStore.
func (s *Store) GetManagedSession(ctx context.Context, id string) (*store.ManagedSession, error) {
	return getManagedSession(ctx, s.read, id, s.timestamp())
}

// UpdateManagedSession implements store.ManagedStore as a compare-and-set
// UPDATE on the one write connection; the version read that tells a stale
// version from a missing session runs in the same transaction. Every
// modification of the session bumps the version (seed 004), appended
// events included: a writer that lost the race re-reads and retries.
func (s *Store) UpdateManagedSession(ctx context.Context, m *store.ManagedSession) (*store.ManagedSession, error) {
	a, err := validateManagedSession(m)
	if err != nil {
		return nil, err
	}
	var out *store.ManagedSession
	err = s.inTx(ctx, func(tx *wtx) error {
		now := s.timestamp()
		// An update that archives is announced (session.archived): was the
		// session live before it?
		archives := false
		if m.ArchivedAt != nil {
			err := tx.QueryRowContext(ctx, `SELECT archived_at IS NULL AND thread_of = '' FROM sessions WHERE id = ? AND kind = 'managed'`, m.ID).Scan(&archives)
			if err != nil && !errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("sqlite: read session %q: %w", m.ID, err)
			}
		}
		res, err := tx.ExecContext(ctx, `UPDATE sessions SET
			doc = ?, sandbox_id = ?, usage = ?, processed_seq = ?, stop_reason = ?,
			terminated_at = ?, archived_at = ?, workspace_seed = ?, version = version + 1, updated_at = ?
			WHERE id = ? AND kind = 'managed' AND version = ?`,
			a.doc, m.SandboxID, a.usage, m.ProcessedSeq, a.stopReason,
			a.terminated, a.archived, m.Lineage.WorkspaceSeed, micros(now), m.ID, m.Version)
		if err != nil {
			return fmt.Errorf("sqlite: update session %q: %w", m.ID, err)
		}
		if n, _ := res.RowsAffected(); n == 1 {
			if out, err = getManagedSession(ctx, tx, m.ID, now); err != nil {
				return err
			}
			if m.ClientUpdate && out.ThreadOf == "" {
				if err := s.lifecycleWebhookTx(ctx, tx, out.TenantID, out.ID, store.WebhookSessionUpdated, out.UpdatedAt); err != nil {
					return err
				}
			}
			if !archives {
				return nil
			}
			return s.lifecycleWebhookTx(ctx, tx, out.TenantID, out.ID, store.WebhookSessionArchived, *out.ArchivedAt)
		}
		var current int64
		err = tx.QueryRowContext(ctx, `SELECT version FROM sessions WHERE id = ? AND kind = 'managed'`, m.ID).Scan(&current)
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

// ListManagedSessions implements store.ManagedStore. Abandoned branches
// are not listed (ListBranches lists them).
func (s *Store) ListManagedSessions(ctx context.Context, p store.ListResourcesParams) ([]*store.ManagedSession, error) {
	where, tail, page := resourcePageOf("s.id", p, 4)
	rows, err := s.read.QueryContext(ctx, `SELECT `+mSessionCols+mSessionFrom+`
		WHERE s.kind = 'managed' AND s.branch_of = '' AND s.thread_of = '' AND s.tenant_id = ?1 AND (?2 = '' OR s.agent_id = ?2)
		  AND (?3 OR s.archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.AgentID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list sessions: %w", err)
	}
	now := s.timestamp()
	return collect(rows, "sessions", func(r scanner) (*store.ManagedSession, error) { return scanManagedSession(r, now) })
}

// DeleteManagedSession implements store.ManagedStore: the session, its
// abandoned branches and its resources in one transaction; the foreign
// keys' ON DELETE CASCADE removes their events (messages), runs and
// checkpoints.
func (s *Store) DeleteManagedSession(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *wtx) error {
		var tenant, branchOf string
		err := tx.QueryRowContext(ctx, `DELETE FROM sessions WHERE id = ? AND kind = 'managed' RETURNING tenant_id, branch_of`, id).
			Scan(&tenant, &branchOf)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("session %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: delete session %q: %w", id, err)
		}
		if branchOf == "" {
			if err := s.lifecycleWebhookTx(ctx, tx, tenant, id, store.WebhookSessionDeleted, s.timestamp()); err != nil {
				return err
			}
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM session_resources WHERE session_id IN
			(SELECT id FROM sessions WHERE branch_of = ?) OR session_id = ?`, id, id); err != nil {
			return fmt.Errorf("sqlite: delete resources of session %q: %w", id, err)
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM sessions WHERE branch_of = ? OR thread_of = ?`, id, id); err != nil {
			return fmt.Errorf("sqlite: delete branches and threads of session %q: %w", id, err)
		}
		return nil
	})
}

// ListSessionThreads implements store.ManagedStore.
func (s *Store) ListSessionThreads(ctx context.Context, parentID string) ([]*store.ManagedSession, error) {
	now := s.timestamp()
	rows, err := s.read.QueryContext(ctx, `SELECT `+mSessionCols+mSessionFrom+`
		WHERE s.kind = 'managed' AND s.thread_of = ? ORDER BY s.created_at, s.id`, parentID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list threads of session %q: %w", parentID, err)
	}
	return collect(rows, "sessions", func(r scanner) (*store.ManagedSession, error) { return scanManagedSession(r, now) })
}
