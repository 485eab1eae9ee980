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

// CreateEnvironment implements store.ManagedStore. Zero CreatedAt becomes
// now; zero UpdatedAt becomes CreatedAt.
func (s *Store) CreateEnvironment(ctx context.Context, e *store.Environment) (*store.Environment, error) {
	in := *e
	if in.ID == "" {
		in.ID = ids.New("env")
	}
	doc, err := jsonObject("environment "+in.ID+": Doc", in.Doc, "{}")
	if err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	var out *store.Environment
	err = s.inTx(ctx, func(tx *wtx) error {
		out, err = scanEnvironment(tx.QueryRowContext(ctx, `INSERT INTO environments
			(id, tenant_id, doc, archived_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING RETURNING `+environmentCols,
			in.ID, in.TenantID, doc, nullMicros(in.ArchivedAt), micros(in.CreatedAt), micros(in.UpdatedAt)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("environment %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: create environment %q: %w", in.ID, err)
		}
		return s.lifecycleWebhookTx(ctx, tx, out.TenantID, out.ID, store.WebhookEnvironmentCreated, out.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetEnvironment implements store.ManagedStore.
func (s *Store) GetEnvironment(ctx context.Context, id string) (*store.Environment, error) {
	e, err := scanEnvironment(s.read.QueryRowContext(ctx, `SELECT `+environmentCols+` FROM environments WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("environment %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get environment %q: %w", id, err)
	}
	return e, nil
}

// UpdateEnvironment implements store.ManagedStore: it replaces the doc.
// An archived environment is read-only (ErrConflict), like an archived
// agent.
func (s *Store) UpdateEnvironment(ctx context.Context, id string, doc json.RawMessage) (*store.Environment, error) {
	body, err := jsonObject("environment "+id+": Doc", doc, "{}")
	if err != nil {
		return nil, err
	}
	var out *store.Environment
	err = s.inTx(ctx, func(tx *wtx) error {
		row, err := scanEnvironment(tx.QueryRowContext(ctx, `UPDATE environments SET doc = ?, updated_at = ?
			WHERE id = ? AND archived_at IS NULL RETURNING `+environmentCols, body, micros(s.timestamp()), id))
		if err == nil {
			out = row
			return s.lifecycleWebhookTx(ctx, tx, row.TenantID, row.ID, store.WebhookEnvironmentUpdated, row.UpdatedAt)
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: update environment %q: %w", id, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM environments WHERE id = ?`, id).Scan(&n); err != nil {
			return fmt.Errorf("sqlite: read environment %q: %w", id, err)
		}
		if n == 0 {
			return fmt.Errorf("environment %q: %w", id, store.ErrNotFound)
		}
		return fmt.Errorf("environment %q is archived; archived environments cannot be updated: %w", id, store.ErrConflict)
	})
	return out, err
}

// ListEnvironments implements store.ManagedStore.
func (s *Store) ListEnvironments(ctx context.Context, p store.ListResourcesParams) ([]*store.Environment, error) {
	where, tail, page := resourcePage(p, 3)
	rows, err := s.read.QueryContext(ctx, `SELECT `+environmentCols+` FROM environments
		WHERE tenant_id = ?1 AND (?2 OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list environments: %w", err)
	}
	return collect(rows, "environments", scanEnvironment)
}

// ArchiveEnvironment implements store.ManagedStore. Archiving twice keeps
// the first archive time; UpdatedAt becomes at when it archives.
func (s *Store) ArchiveEnvironment(ctx context.Context, id string, at time.Time) (*store.Environment, error) {
	if at.IsZero() {
		at = s.timestamp()
	}
	var e *store.Environment
	err := s.inTx(ctx, func(tx *wtx) error {
		var (
			live bool
			err  error
		)
		if err := tx.QueryRowContext(ctx, `SELECT archived_at IS NULL FROM environments WHERE id = ?`, id).Scan(&live); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("environment %q: %w", id, store.ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("sqlite: read environment %q: %w", id, err)
		}
		e, err = scanEnvironment(tx.QueryRowContext(ctx, `UPDATE environments SET
			updated_at = CASE WHEN archived_at IS NULL THEN ?1 ELSE updated_at END,
			archived_at = COALESCE(archived_at, ?1)
			WHERE id = ?2 RETURNING `+environmentCols, micros(at), id))
		if err != nil {
			return fmt.Errorf("sqlite: archive environment %q: %w", id, err)
		}
		if !live {
			return nil // archived before: announced then
		}
		return s.lifecycleWebhookTx(ctx, tx, e.TenantID, e.ID, store.WebhookEnvironmentArchived, at)
	})
	if err != nil {
		return nil, err
	}
	return e, nil
}

// DeleteEnvironment implements store.ManagedStore. Sessions that name the
// environment keep their EnvironmentID: whether deleting is allowed while
// sessions use it is the API's decision.
func (s *Store) DeleteEnvironment(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *wtx) error {
		var tenant string
		err := tx.QueryRowContext(ctx, `DELETE FROM environments WHERE id = ? RETURNING tenant_id`, id).Scan(&tenant)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("environment %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: delete environment %q: %w", id, err)
		}
		return s.lifecycleWebhookTx(ctx, tx, tenant, id, store.WebhookEnvironmentDeleted, s.timestamp())
	})
}
