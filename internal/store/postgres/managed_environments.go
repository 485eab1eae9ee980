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

// CreateEnvironment inserts an environment. Zero CreatedAt becomes now;
// zero UpdatedAt becomes CreatedAt.
func (s *Store) CreateEnvironment(ctx context.Context, e *store.Environment) (*store.Environment, error) {
	in := *e
	if in.ID == "" {
		in.ID = ids.New("env")
	}
	doc, err := objectArg("environment "+in.ID+": Doc", in.Doc)
	if err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.clock()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	var out *store.Environment
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out, err = scanEnvironment(tx.QueryRow(ctx, `INSERT INTO environments
			(id, tenant_id, doc, archived_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
			RETURNING `+environmentCols,
			in.ID, in.TenantID, doc, in.ArchivedAt, in.CreatedAt, in.UpdatedAt))
		if err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("create environment %s: %w", in.ID, store.ErrAlreadyExists)
			}
			return mapErr("create environment "+in.ID, err)
		}
		return s.lifecycleWebhook(ctx, tx, out.TenantID, out.ID, store.WebhookEnvironmentCreated, out.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetEnvironment returns the environment or ErrNotFound.
func (s *Store) GetEnvironment(ctx context.Context, id string) (*store.Environment, error) {
	e, err := scanEnvironment(s.pool.QueryRow(ctx, `SELECT `+environmentCols+` FROM environments WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("environment "+id, err)
	}
	return e, nil
}

// UpdateEnvironment replaces the doc. An archived environment is read-only
// (ErrConflict), like an archived agent.
func (s *Store) UpdateEnvironment(ctx context.Context, id string, doc json.RawMessage) (*store.Environment, error) {
	body, err := objectArg("environment "+id+": Doc", doc)
	if err != nil {
		return nil, err
	}
	var out *store.Environment
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out, err = scanEnvironment(tx.QueryRow(ctx, `UPDATE environments SET doc = $2, updated_at = $3
			WHERE id = $1 AND archived_at IS NULL RETURNING `+environmentCols, id, body, s.clock()))
		if err != nil {
			return err
		}
		return s.lifecycleWebhook(ctx, tx, out.TenantID, out.ID, store.WebhookEnvironmentUpdated, out.UpdatedAt)
	})
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapErr("update environment "+id, err)
	}
	// No row matched: an environment is never un-archived, so a row that
	// exists now is archived.
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM environments WHERE id = $1`, id).Scan(&n); err != nil {
		return nil, mapErr("read environment "+id, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("environment %s: %w", id, store.ErrNotFound)
	}
	return nil, fmt.Errorf("environment %s is archived; archived environments cannot be updated: %w", id, store.ErrConflict)
}

// ListEnvironments pages through a tenant's environments by id.
func (s *Store) ListEnvironments(ctx context.Context, p store.ListResourcesParams) ([]*store.Environment, error) {
	where, tail, page := resourcePage(p, 3)
	rows, err := s.pool.Query(ctx, `SELECT `+environmentCols+` FROM environments
		WHERE tenant_id = $1 AND ($2::boolean OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, mapErr("list environments", err)
	}
	return collect(rows, "environments", scanEnvironment)
}

// ArchiveEnvironment sets ArchivedAt (and UpdatedAt) to at; archiving twice
// keeps the first archive time.
func (s *Store) ArchiveEnvironment(ctx context.Context, id string, at time.Time) (*store.Environment, error) {
	if at.IsZero() {
		at = s.clock()
	}
	var e *store.Environment
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var live bool
		if err := tx.QueryRow(ctx, `SELECT archived_at IS NULL FROM environments WHERE id = $1 FOR UPDATE`, id).Scan(&live); err != nil {
			return mapErr("archive environment "+id, err)
		}
		var err error
		e, err = scanEnvironment(tx.QueryRow(ctx, `UPDATE environments SET
			updated_at = CASE WHEN archived_at IS NULL THEN $2 ELSE updated_at END,
			archived_at = COALESCE(archived_at, $2)
			WHERE id = $1 RETURNING `+environmentCols, id, at))
		if err != nil {
			return mapErr("archive environment "+id, err)
		}
		if !live {
			return nil // archived before: announced then
		}
		return s.lifecycleWebhook(ctx, tx, e.TenantID, e.ID, store.WebhookEnvironmentArchived, at)
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// DeleteEnvironment removes the environment. Sessions that name it keep
// their EnvironmentID: whether deleting is allowed while sessions use it is
// the API's decision.
func (s *Store) DeleteEnvironment(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var tenant string
		err := tx.QueryRow(ctx, `DELETE FROM environments WHERE id = $1 RETURNING tenant_id`, id).Scan(&tenant)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("delete environment %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return mapErr("delete environment "+id, err)
		}
		return s.lifecycleWebhook(ctx, tx, tenant, id, store.WebhookEnvironmentDeleted, s.clock())
	})
}
