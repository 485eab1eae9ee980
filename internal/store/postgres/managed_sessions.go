package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

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

// A Managed Agents session is a row of sessions with kind 'managed' (one
// session model, issue 13); message_count is its event counter.

// CreateManagedSession inserts a session at version 1 with no events. Zero
// CreatedAt becomes now; zero UpdatedAt becomes CreatedAt.
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
	b, err := validateEvents(in.ID, p.Events)
	if err != nil {
		return nil, nil, nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.clock()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	var (
		out *store.ManagedSession
		evs []store.SessionEvent
		rs  []*store.SessionResource
	)
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `INSERT INTO sessions
			(id, tenant_id, kind, status, version, custom_state, runtime, agent_id, agent_version, environment_id,
			 doc, sandbox_id, usage, processed_seq, stop_reason, terminated_at, archived_at, workspace_seed,
			 message_count, created_at, updated_at, thread_of)
			VALUES ($1, $2, 'managed', 'active', 1, '{}', '{}', $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13,
			 $14, $15, $16, $17)
			ON CONFLICT DO NOTHING`,
			in.ID, in.TenantID, in.AgentID, in.AgentVersion, in.EnvironmentID, a.doc, in.SandboxID, a.usage,
			in.ProcessedSeq, a.stopReason, in.TerminatedAt, in.ArchivedAt, in.Lineage.WorkspaceSeed,
			len(b.ids), in.CreatedAt, in.UpdatedAt, in.ThreadOf)
		if err != nil {
			return mapErr("create session "+in.ID, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("create session %s: %w", in.ID, store.ErrAlreadyExists)
		}
		if in.ThreadOf == "" {
			// A thread is announced by its parent's session.thread_created.
			if err := s.enqueueWebhooks(ctx, tx, in.TenantID, in.ID, []webhookEvent{
				{typ: store.WebhookSessionCreated, resource: in.ID, at: in.CreatedAt}}); err != nil {
				return err
			}
		}
		if evs, err = s.insertEvents(ctx, tx, s.clock(), in.ID, 0, b); err != nil {
			return err
		}
		if rs, err = s.createResourcesTx(ctx, tx, p.Resources); err != nil {
			return err
		}
		out, err = getManagedSession(ctx, tx, in.ID, s.clock())
		return err
	})
	if err != nil {
		return nil, nil, nil, err
	}
	return out, evs, rs, nil
}

// getManagedSession reads one Managed Agents session (a branch too).
func getManagedSession(ctx context.Context, q querier, id string, now time.Time) (*store.ManagedSession, error) {
	m, err := scanManagedSession(q.QueryRow(ctx, `SELECT `+mSessionCols+mSessionFrom+`
		WHERE s.id = $1 AND s.kind = 'managed'`, id), now)
	if err != nil {
		return nil, mapErr("session "+id, err)
	}
	return m, nil
}

// GetManagedSession returns the session or ErrNotFound.
func (s *Store) GetManagedSession(ctx context.Context, id string) (*store.ManagedSession, error) {
	return getManagedSession(ctx, s.pool, id, s.clock())
}

// UpdateManagedSession is one compare-and-set UPDATE: under READ COMMITTED
// a concurrent writer waits for the row lock and re-checks the version
// against the committed row, so exactly one writer per version wins. Every
// modification of the session bumps the version (seed 004), appended
// events included: a writer that lost the race re-reads and retries.
func (s *Store) UpdateManagedSession(ctx context.Context, m *store.ManagedSession) (*store.ManagedSession, error) {
	a, err := validateManagedSession(m)
	if err != nil {
		return nil, err
	}
	var out *store.ManagedSession
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		now := s.clock()
		// An update that archives is announced (session.archived): was the
		// session live before it?
		archives := false
		if m.ArchivedAt != nil {
			err := tx.QueryRow(ctx, `SELECT archived_at IS NULL AND thread_of = '' FROM sessions WHERE id = $1 AND kind = 'managed' FOR UPDATE`, m.ID).Scan(&archives)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return mapErr("read session "+m.ID, err)
			}
		}
		tag, err := tx.Exec(ctx, `UPDATE sessions SET
			doc = $3, sandbox_id = $4, usage = $5, processed_seq = $6, stop_reason = $7,
			terminated_at = $8, archived_at = $9, workspace_seed = $10, version = version + 1, updated_at = $11
			WHERE id = $1 AND kind = 'managed' AND version = $2`,
			m.ID, m.Version, a.doc, m.SandboxID, a.usage, m.ProcessedSeq, a.stopReason,
			m.TerminatedAt, m.ArchivedAt, m.Lineage.WorkspaceSeed, now)
		if err != nil {
			return mapErr("update session "+m.ID, err)
		}
		if tag.RowsAffected() == 1 {
			if out, err = getManagedSession(ctx, tx, m.ID, now); err != nil {
				return err
			}
			if m.ClientUpdate && out.ThreadOf == "" {
				if err := s.lifecycleWebhook(ctx, tx, out.TenantID, out.ID, store.WebhookSessionUpdated, out.UpdatedAt); err != nil {
					return err
				}
			}
			if !archives {
				return nil
			}
			return s.lifecycleWebhook(ctx, tx, out.TenantID, out.ID, store.WebhookSessionArchived, *out.ArchivedAt)
		}
		// No row matched: tell a missing session from a stale version.
		var current int64
		if err := tx.QueryRow(ctx, `SELECT version FROM sessions WHERE id = $1 AND kind = 'managed'`, m.ID).Scan(&current); err != nil {
			return mapErr("update session "+m.ID, err)
		}
		return fmt.Errorf("update session %s: expected version %d, current version %d: %w",
			m.ID, m.Version, current, store.ErrVersionMismatch)
	})
	return out, err
}

// ListManagedSessions pages through a tenant's sessions by id, optionally
// of one agent. Abandoned branches are not listed (ListBranches lists them).
func (s *Store) ListManagedSessions(ctx context.Context, p store.ListResourcesParams) ([]*store.ManagedSession, error) {
	where, tail, page := resourcePageOf(`s.id COLLATE "C"`, p, 4)
	rows, err := s.pool.Query(ctx, `SELECT `+mSessionCols+mSessionFrom+`
		WHERE s.kind = 'managed' AND s.branch_of = '' AND s.thread_of = '' AND s.tenant_id = $1 AND ($2::text = '' OR s.agent_id = $2)
		  AND ($3::boolean OR s.archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.AgentID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, mapErr("list sessions", err)
	}
	now := s.clock()
	return collect(rows, "sessions", func(r pgx.Row) (*store.ManagedSession, error) { return scanManagedSession(r, now) })
}

// DeleteManagedSession removes the session, its abandoned branches and its
// resources in one transaction; ON DELETE CASCADE removes their events
// (messages), runs and checkpoints.
func (s *Store) DeleteManagedSession(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var tenant, branchOf string
		err := tx.QueryRow(ctx, `DELETE FROM sessions WHERE id = $1 AND kind = 'managed' RETURNING tenant_id, branch_of`, id).
			Scan(&tenant, &branchOf)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("delete session %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return mapErr("delete session "+id, err)
		}
		if branchOf == "" {
			if err := s.lifecycleWebhook(ctx, tx, tenant, id, store.WebhookSessionDeleted, s.clock()); err != nil {
				return err
			}
		}
		if _, err := tx.Exec(ctx, `DELETE FROM session_resources WHERE session_id = $1
			OR session_id IN (SELECT id COLLATE "C" FROM sessions WHERE branch_of = $1)`, id); err != nil {
			return mapErr("delete resources of session "+id, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM sessions WHERE branch_of = $1 OR thread_of = $1`, id); err != nil {
			return mapErr("delete branches and threads of session "+id, err)
		}
		return nil
	})
}

// ListSessionThreads implements store.ManagedStore.
func (s *Store) ListSessionThreads(ctx context.Context, parentID string) ([]*store.ManagedSession, error) {
	now := s.clock()
	rows, err := s.pool.Query(ctx, `SELECT `+mSessionCols+mSessionFrom+`
		WHERE s.kind = 'managed' AND s.thread_of = $1 ORDER BY s.created_at, s.id COLLATE "C"`, parentID)
	if err != nil {
		return nil, mapErr("list threads of session "+parentID, err)
	}
	return collect(rows, "sessions", func(r pgx.Row) (*store.ManagedSession, error) { return scanManagedSession(r, now) })
}
