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

var _ store.ManagedStore = (*Store)(nil)

// CreateAgent implements store.ManagedStore: version 1 of a new agent. Zero
// CreatedAt becomes now; UpdatedAt is CreatedAt (version 1 is made then).
func (s *Store) CreateAgent(ctx context.Context, a *store.Agent) (*store.Agent, error) {
	in := *a
	if in.ID == "" {
		in.ID = ids.New("agent")
	}
	doc, err := jsonObject("agent "+in.ID+": Doc", in.Doc, "{}")
	if err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	var out *store.Agent
	err = s.inTx(ctx, func(tx *wtx) error {
		out, err = scanAgent(tx.QueryRowContext(ctx, `INSERT INTO agents
			(id, version, tenant_id, doc, latest, archived_at, created_at, updated_at)
			VALUES (?, 1, ?, ?, 1, ?, ?, ?)
			ON CONFLICT DO NOTHING RETURNING `+agentCols,
			in.ID, in.TenantID, doc, nullMicros(in.ArchivedAt), micros(in.CreatedAt), micros(in.CreatedAt)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("agent %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: create agent %q: %w", in.ID, err)
		}
		return s.lifecycleWebhookTx(ctx, tx, out.TenantID, out.ID, store.WebhookAgentCreated, out.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// UpdateAgent implements store.ManagedStore. The transaction holds SQLite's
// one write lock, so the latest version it reads is the one it replaces.
func (s *Store) UpdateAgent(ctx context.Context, id string, expectedVersion int64, doc json.RawMessage) (*store.Agent, error) {
	body, err := jsonObject("agent "+id+": Doc", doc, "{}")
	if err != nil {
		return nil, err
	}
	var out *store.Agent
	err = s.inTx(ctx, func(tx *wtx) error {
		cur, err := scanAgent(tx.QueryRowContext(ctx, `SELECT `+agentCols+` FROM agents WHERE id = ? AND latest = 1`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("agent %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read agent %q: %w", id, err)
		}
		if err := agentUpdatable(cur, expectedVersion); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `UPDATE agents SET latest = 0 WHERE id = ? AND version = ?`, id, cur.Version); err != nil {
			return fmt.Errorf("sqlite: update agent %q: %w", id, err)
		}
		out, err = scanAgent(tx.QueryRowContext(ctx, `INSERT INTO agents
			(id, version, tenant_id, doc, latest, archived_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, 1, NULL, ?, ?) RETURNING `+agentCols,
			id, cur.Version+1, cur.TenantID, body, micros(cur.CreatedAt), micros(s.timestamp())))
		if err != nil {
			return fmt.Errorf("sqlite: insert agent %q version %d: %w", id, cur.Version+1, err)
		}
		return s.lifecycleWebhookTx(ctx, tx, out.TenantID, out.ID, store.WebhookAgentUpdated, out.UpdatedAt)
	})
	return out, err
}

// agentUpdatable says why cur, the latest version, may not get a new one.
func agentUpdatable(cur *store.Agent, expectedVersion int64) error {
	if cur.ArchivedAt != nil {
		return fmt.Errorf("agent %q is archived; archived agents cannot be updated: %w", cur.ID, store.ErrConflict)
	}
	if cur.Version != expectedVersion {
		return fmt.Errorf("update agent %q: expected version %d, current version %d: %w",
			cur.ID, expectedVersion, cur.Version, store.ErrVersionMismatch)
	}
	return nil
}

// GetAgent implements store.ManagedStore: version 0 is the latest.
func (s *Store) GetAgent(ctx context.Context, id string, version int64) (*store.Agent, error) {
	if version < 0 {
		return nil, fmt.Errorf("agent %q: version %d is negative: %w", id, version, store.ErrInvalid)
	}
	a, err := scanAgent(s.read.QueryRowContext(ctx, `SELECT `+agentCols+` FROM agents
		WHERE id = ?1 AND ((?2 = 0 AND latest = 1) OR version = ?2)`, id, version))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("agent %q version %d: %w", id, version, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get agent %q: %w", id, err)
	}
	return a, nil
}

// ListAgents implements store.ManagedStore from the latest-version index.
func (s *Store) ListAgents(ctx context.Context, p store.ListResourcesParams) ([]*store.Agent, error) {
	where, tail, page := resourcePage(p, 3)
	rows, err := s.read.QueryContext(ctx, `SELECT `+agentCols+` FROM agents
		WHERE latest = 1 AND tenant_id = ?1 AND (?2 OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list agents: %w", err)
	}
	return collect(rows, "agents", scanAgent)
}

// ListAgentVersions implements store.ManagedStore: newest first.
func (s *Store) ListAgentVersions(ctx context.Context, id string) ([]*store.Agent, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+agentCols+` FROM agents WHERE id = ? ORDER BY version DESC`, id)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list versions of agent %q: %w", id, err)
	}
	out, err := collect(rows, "agent versions", scanAgent)
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("agent %q: %w", id, store.ErrNotFound)
	}
	return out, err
}

// ArchiveAgent implements store.ManagedStore. It marks every version (the
// agent is archived, whichever version a reader asks for), creates no
// version and keeps the first archive time when archived twice.
func (s *Store) ArchiveAgent(ctx context.Context, id string, at time.Time) (*store.Agent, error) {
	if at.IsZero() {
		at = s.timestamp()
	}
	var out *store.Agent
	err := s.inTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `UPDATE agents SET archived_at = ? WHERE id = ? AND archived_at IS NULL`,
			micros(at), id)
		if err != nil {
			return fmt.Errorf("sqlite: archive agent %q: %w", id, err)
		}
		out, err = scanAgent(tx.QueryRowContext(ctx, `SELECT `+agentCols+` FROM agents WHERE id = ? AND latest = 1`, id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("agent %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read agent %q: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return nil // archived before: announced then
		}
		return s.lifecycleWebhookTx(ctx, tx, out.TenantID, out.ID, store.WebhookAgentArchived, at)
	})
	return out, err
}
