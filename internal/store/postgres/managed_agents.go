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

var _ store.ManagedStore = (*Store)(nil)

// CreateAgent inserts version 1 of a new agent. Zero CreatedAt becomes now;
// UpdatedAt is CreatedAt (version 1 is made then). The primary key settles
// concurrent creators.
func (s *Store) CreateAgent(ctx context.Context, a *store.Agent) (*store.Agent, error) {
	in := *a
	if in.ID == "" {
		in.ID = ids.New("agent")
	}
	doc, err := objectArg("agent "+in.ID+": Doc", in.Doc)
	if err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.clock()
	}
	var out *store.Agent
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out, err = scanAgent(tx.QueryRow(ctx, `INSERT INTO agents
			(id, version, tenant_id, doc, latest, archived_at, created_at, updated_at)
			VALUES ($1, 1, $2, $3, true, $4, $5, $5) RETURNING `+agentCols,
			in.ID, in.TenantID, doc, in.ArchivedAt, in.CreatedAt))
		if err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("create agent %s: %w", in.ID, store.ErrAlreadyExists)
			}
			return mapErr("create agent "+in.ID, err)
		}
		return s.lifecycleWebhook(ctx, tx, out.TenantID, out.ID, store.WebhookAgentCreated, out.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// lockAgent serialises the writers of one agent on its version-1 row,
// which every agent has and which never stops being version 1. (Locking
// the latest row instead would not do: a waiter re-checks "latest" on the
// row it waited for, finds it no longer latest and would see no agent.)
// Statements after it, under READ COMMITTED, see what earlier writers
// committed.
func lockAgent(ctx context.Context, tx pgx.Tx, id string) error {
	var one int
	err := tx.QueryRow(ctx, `SELECT 1 FROM agents WHERE id = $1 AND version = 1 FOR NO KEY UPDATE`, id).Scan(&one)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("agent %s: %w", id, store.ErrNotFound)
	}
	return mapErr("lock agent "+id, err)
}

// UpdateAgent writes version expectedVersion+1 under the agent's lock, so
// of racing updaters from one version exactly one wins.
func (s *Store) UpdateAgent(ctx context.Context, id string, expectedVersion int64, doc json.RawMessage) (*store.Agent, error) {
	body, err := objectArg("agent "+id+": Doc", doc)
	if err != nil {
		return nil, err
	}
	var out *store.Agent
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockAgent(ctx, tx, id); err != nil {
			return err
		}
		cur, err := scanAgent(tx.QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE id = $1 AND latest`, id))
		if err != nil {
			return mapErr("read agent "+id, err)
		}
		if err := agentUpdatable(cur, expectedVersion); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `UPDATE agents SET latest = false WHERE id = $1 AND version = $2`, id, cur.Version); err != nil {
			return mapErr("update agent "+id, err)
		}
		out, err = scanAgent(tx.QueryRow(ctx, `INSERT INTO agents
			(id, version, tenant_id, doc, latest, archived_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, true, NULL, $5, $6) RETURNING `+agentCols,
			id, cur.Version+1, cur.TenantID, body, cur.CreatedAt, s.clock()))
		if err != nil {
			return mapErr(fmt.Sprintf("insert agent %s version %d", id, cur.Version+1), err)
		}
		return s.lifecycleWebhook(ctx, tx, out.TenantID, out.ID, store.WebhookAgentUpdated, out.UpdatedAt)
	})
	return out, err
}

// agentUpdatable says why cur, the latest version, may not get a new one.
func agentUpdatable(cur *store.Agent, expectedVersion int64) error {
	if cur.ArchivedAt != nil {
		return fmt.Errorf("agent %s is archived; archived agents cannot be updated: %w", cur.ID, store.ErrConflict)
	}
	if cur.Version != expectedVersion {
		return fmt.Errorf("update agent %s: expected version %d, current version %d: %w",
			cur.ID, expectedVersion, cur.Version, store.ErrVersionMismatch)
	}
	return nil
}

// GetAgent returns version (0 = latest) or ErrNotFound.
func (s *Store) GetAgent(ctx context.Context, id string, version int64) (*store.Agent, error) {
	if version < 0 {
		return nil, fmt.Errorf("agent %s: version %d is negative: %w", id, version, store.ErrInvalid)
	}
	a, err := scanAgent(s.pool.QueryRow(ctx, `SELECT `+agentCols+` FROM agents
		WHERE id = $1 AND (($2::bigint = 0 AND latest) OR version = $2)`, id, version))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("agent %s version %d", id, version), err)
	}
	return a, nil
}

// ListAgents lists the latest version of each agent from the partial index.
func (s *Store) ListAgents(ctx context.Context, p store.ListResourcesParams) ([]*store.Agent, error) {
	where, tail, page := resourcePage(p, 3)
	rows, err := s.pool.Query(ctx, `SELECT `+agentCols+` FROM agents
		WHERE latest AND tenant_id = $1 AND ($2::boolean OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, mapErr("list agents", err)
	}
	return collect(rows, "agents", scanAgent)
}

// ListAgentVersions lists every version, newest first.
func (s *Store) ListAgentVersions(ctx context.Context, id string) ([]*store.Agent, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+agentCols+` FROM agents WHERE id = $1 ORDER BY version DESC`, id)
	if err != nil {
		return nil, mapErr("list versions of agent "+id, err)
	}
	out, err := collect(rows, "agent versions", scanAgent)
	if err == nil && len(out) == 0 {
		err = fmt.Errorf("agent %s: %w", id, store.ErrNotFound)
	}
	return out, err
}

// ArchiveAgent marks every version archived under the agent's lock (so a
// racing UpdateAgent either lands before and is archived too, or after and
// is refused), creates no version and keeps the first archive time.
func (s *Store) ArchiveAgent(ctx context.Context, id string, at time.Time) (*store.Agent, error) {
	if at.IsZero() {
		at = s.clock()
	}
	var out *store.Agent
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockAgent(ctx, tx, id); err != nil {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE agents SET archived_at = $2 WHERE id = $1 AND archived_at IS NULL`, id, at)
		if err != nil {
			return mapErr("archive agent "+id, err)
		}
		out, err = scanAgent(tx.QueryRow(ctx, `SELECT `+agentCols+` FROM agents WHERE id = $1 AND latest`, id))
		if err != nil {
			return mapErr("read agent "+id, err)
		}
		if tag.RowsAffected() == 0 {
			return nil // archived before: announced then
		}
		return s.lifecycleWebhook(ctx, tx, out.TenantID, out.ID, store.WebhookAgentArchived, at)
	})
	return out, err
}
