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

// CreateTenant implements store.TenantStore. ON CONFLICT DO NOTHING covers
// both the id and the unique name.
func (s *Store) CreateTenant(ctx context.Context, t store.Tenant) (*store.Tenant, error) {
	if err := requireID("tenant name", t.Name); err != nil {
		return nil, err
	}
	if t.ID == "" {
		t.ID = ids.New("tnt")
	}
	t.CreatedAt = s.timestamp()
	res, err := s.write.ExecContext(ctx, `INSERT INTO tenants (id, name, created_at) VALUES (?, ?, ?)
		ON CONFLICT DO NOTHING`, t.ID, t.Name, micros(t.CreatedAt))
	if err != nil {
		return nil, fmt.Errorf("sqlite: create tenant %q: %w", t.Name, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return nil, fmt.Errorf("tenant %q (name %q): %w", t.ID, t.Name, store.ErrAlreadyExists)
	}
	return &t, nil
}

func scanTenant(r scanner) (*store.Tenant, error) {
	var t store.Tenant
	var created int64
	if err := r.Scan(&t.ID, &t.Name, &created); err != nil {
		return nil, err
	}
	t.CreatedAt = fromMicros(created)
	return &t, nil
}

// GetTenant implements store.TenantStore.
func (s *Store) GetTenant(ctx context.Context, id string) (*store.Tenant, error) {
	return s.getTenant(ctx, "id", id)
}

// GetTenantByName implements store.TenantStore.
func (s *Store) GetTenantByName(ctx context.Context, name string) (*store.Tenant, error) {
	return s.getTenant(ctx, "name", name)
}

// getTenant looks a tenant up by col, one of two constants.
func (s *Store) getTenant(ctx context.Context, col, v string) (*store.Tenant, error) {
	t, err := scanTenant(s.read.QueryRowContext(ctx, `SELECT id, name, created_at FROM tenants WHERE `+col+` = ?`, v))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("tenant %s %q: %w", col, v, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get tenant: %w", err)
	}
	return t, nil
}

// ListTenants lists tenants in creation order.
func (s *Store) ListTenants(ctx context.Context) ([]*store.Tenant, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT id, name, created_at FROM tenants ORDER BY created_at, id`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list tenants: %w", err)
	}
	defer rows.Close()
	var out []*store.Tenant
	for rows.Next() {
		t, err := scanTenant(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan tenant: %w", err)
		}
		out = append(out, t)
	}
	return out, rows.Err()
}

const apiKeyCols = `id, tenant_id, name, prefix, hash, admin, environment_id, created_at, revoked_at, last_used_at`

func scanAPIKey(r scanner) (*store.APIKey, error) {
	var k store.APIKey
	var created int64
	var revoked, used sql.NullInt64
	if err := r.Scan(&k.ID, &k.TenantID, &k.Name, &k.Prefix, &k.Hash, &k.Admin, &k.EnvironmentID, &created, &revoked, &used); err != nil {
		return nil, err
	}
	k.CreatedAt, k.RevokedAt, k.LastUsedAt = fromMicros(created), timePtr(revoked), timePtr(used)
	return &k, nil
}

// CreateAPIKey implements store.TenantStore: ErrNotFound for an unknown
// tenant, ErrAlreadyExists for a taken id or hash.
func (s *Store) CreateAPIKey(ctx context.Context, p store.CreateAPIKeyParams) (*store.APIKey, error) {
	if err := requireID("key hash", p.Hash); err != nil {
		return nil, err
	}
	if err := requireID("tenant id", p.TenantID); err != nil {
		return nil, err
	}
	if p.ID == "" {
		p.ID = ids.New("key")
	}
	k, err := scanAPIKey(s.write.QueryRowContext(ctx, `INSERT INTO api_keys (id, tenant_id, name, prefix, hash,
		admin, environment_id, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING `+apiKeyCols,
		p.ID, p.TenantID, p.Name, p.Prefix, p.Hash, p.Admin, p.EnvironmentID, micros(s.timestamp())))
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return nil, fmt.Errorf("api key %q: %w", p.ID, store.ErrAlreadyExists)
	case s.drv.isForeignKey(err):
		return nil, fmt.Errorf("tenant %q: %w", p.TenantID, store.ErrNotFound)
	case err != nil:
		return nil, fmt.Errorf("sqlite: create api key: %w", err)
	}
	return k, nil
}

// GetAPIKeyByHash implements store.TenantStore.
func (s *Store) GetAPIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	return s.getAPIKey(ctx, "hash", hash)
}

// GetAPIKey implements store.TenantStore.
func (s *Store) GetAPIKey(ctx context.Context, id string) (*store.APIKey, error) {
	return s.getAPIKey(ctx, "id", id)
}

func (s *Store) getAPIKey(ctx context.Context, col, v string) (*store.APIKey, error) {
	k, err := scanAPIKey(s.read.QueryRowContext(ctx, `SELECT `+apiKeyCols+` FROM api_keys WHERE `+col+` = ?`, v))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("api key: %w", store.ErrNotFound) // never echo a hash
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get api key: %w", err)
	}
	return k, nil
}

// ListAPIKeys implements store.TenantStore, in creation order.
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string) ([]*store.APIKey, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+apiKeyCols+` FROM api_keys WHERE ? = '' OR tenant_id = ?
		ORDER BY created_at, rowid`, tenantID, tenantID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list api keys: %w", err)
	}
	defer rows.Close()
	var out []*store.APIKey
	for rows.Next() {
		k, err := scanAPIKey(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan api key: %w", err)
		}
		out = append(out, k)
	}
	return out, rows.Err()
}

// RevokeAPIKey implements store.TenantStore; a second revoke keeps the first
// time.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	res, err := s.write.ExecContext(ctx, `UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?`,
		micros(at), id)
	if err != nil {
		return fmt.Errorf("sqlite: revoke api key %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("api key %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// CountAdminKeys implements store.TenantStore.
func (s *Store) CountAdminKeys(ctx context.Context) (int, error) {
	var n int
	if err := s.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM api_keys WHERE admin = 1 AND revoked_at IS NULL`).
		Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count admin keys: %w", err)
	}
	return n, nil
}
