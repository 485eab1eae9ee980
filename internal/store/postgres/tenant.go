package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// CreateTenant inserts a tenant; ErrAlreadyExists when the id or name is
// taken.
func (s *Store) CreateTenant(ctx context.Context, t store.Tenant) (*store.Tenant, error) {
	if t.Name == "" {
		return nil, fmt.Errorf("create tenant: Name is required: %w", store.ErrInvalid)
	}
	if t.ID == "" {
		t.ID = ids.New("tnt")
	}
	if t.CreatedAt.IsZero() {
		t.CreatedAt = s.clock()
	}
	out, err := scanTenant(s.pool.QueryRow(ctx, `INSERT INTO tenants (id, name, created_at)
		VALUES ($1, $2, $3) RETURNING id, name, created_at`, t.ID, t.Name, t.CreatedAt))
	if err != nil {
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("create tenant %s (%q): %w", t.ID, t.Name, store.ErrAlreadyExists)
		}
		return nil, mapErr(fmt.Sprintf("create tenant %s", t.ID), err)
	}
	return out, nil
}

func scanTenant(row pgx.Row) (*store.Tenant, error) {
	var t store.Tenant
	if err := row.Scan(&t.ID, &t.Name, &t.CreatedAt); err != nil {
		return nil, err
	}
	t.CreatedAt = t.CreatedAt.UTC()
	return &t, nil
}

// GetTenant returns a tenant by id.
func (s *Store) GetTenant(ctx context.Context, id string) (*store.Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, "SELECT id, name, created_at FROM tenants WHERE id = $1", id))
	return t, mapErr(fmt.Sprintf("tenant %s", id), err)
}

// GetTenantByName returns a tenant by its unique name.
func (s *Store) GetTenantByName(ctx context.Context, name string) (*store.Tenant, error) {
	t, err := scanTenant(s.pool.QueryRow(ctx, "SELECT id, name, created_at FROM tenants WHERE name = $1", name))
	return t, mapErr(fmt.Sprintf("tenant named %q", name), err)
}

// ListTenants returns every tenant, oldest first.
func (s *Store) ListTenants(ctx context.Context) ([]*store.Tenant, error) {
	rows, err := s.pool.Query(ctx, "SELECT id, name, created_at FROM tenants ORDER BY created_at, id")
	if err != nil {
		return nil, mapErr("list tenants", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Tenant, error) { return scanTenant(row) })
	return out, mapErr("list tenants", err)
}

const apiKeyCols = `id, tenant_id, name, prefix, hash, admin, environment_id, created_at, revoked_at, last_used_at`

func scanAPIKey(row pgx.Row) (*store.APIKey, error) {
	var k store.APIKey
	if err := row.Scan(&k.ID, &k.TenantID, &k.Name, &k.Prefix, &k.Hash, &k.Admin, &k.EnvironmentID,
		&k.CreatedAt, &k.RevokedAt, &k.LastUsedAt); err != nil {
		return nil, err
	}
	k.CreatedAt, k.RevokedAt, k.LastUsedAt = k.CreatedAt.UTC(), utcPtr(k.RevokedAt), utcPtr(k.LastUsedAt)
	return &k, nil
}

// CreateAPIKey stores a key's hash; ErrNotFound when the tenant does not
// exist, ErrAlreadyExists when the id or hash is taken.
func (s *Store) CreateAPIKey(ctx context.Context, p store.CreateAPIKeyParams) (*store.APIKey, error) {
	if p.TenantID == "" || p.Hash == "" {
		return nil, fmt.Errorf("create api key: TenantID and Hash are required: %w", store.ErrInvalid)
	}
	if p.ID == "" {
		p.ID = ids.New("key")
	}
	k, err := scanAPIKey(s.pool.QueryRow(ctx, `INSERT INTO api_keys (id, tenant_id, name, prefix, hash, admin, environment_id, created_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING `+apiKeyCols,
		p.ID, p.TenantID, p.Name, p.Prefix, p.Hash, p.Admin, p.EnvironmentID, s.clock()))
	if err != nil {
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("create api key %s: %w", p.ID, store.ErrAlreadyExists)
		}
		return nil, mapErr(fmt.Sprintf("create api key %s for tenant %s", p.ID, p.TenantID), err)
	}
	return k, nil
}

// GetAPIKeyByHash returns the key (revoked or not) with that hash.
func (s *Store) GetAPIKeyByHash(ctx context.Context, hash string) (*store.APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, "SELECT "+apiKeyCols+" FROM api_keys WHERE hash = $1", hash))
	return k, mapErr("api key by hash", err)
}

// GetAPIKey returns a key by id.
func (s *Store) GetAPIKey(ctx context.Context, id string) (*store.APIKey, error) {
	k, err := scanAPIKey(s.pool.QueryRow(ctx, "SELECT "+apiKeyCols+" FROM api_keys WHERE id = $1", id))
	return k, mapErr(fmt.Sprintf("api key %s", id), err)
}

// ListAPIKeys lists a tenant's keys (every key when tenantID is ""), oldest
// first.
func (s *Store) ListAPIKeys(ctx context.Context, tenantID string) ([]*store.APIKey, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+apiKeyCols+
		" FROM api_keys WHERE $1::text = '' OR tenant_id = $1 ORDER BY created_at, id", tenantID)
	if err != nil {
		return nil, mapErr("list api keys", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.APIKey, error) { return scanAPIKey(row) })
	return out, mapErr("list api keys", err)
}

// RevokeAPIKey sets RevokedAt once; a second revoke keeps the first time.
func (s *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	tag, err := s.pool.Exec(ctx, "UPDATE api_keys SET revoked_at = coalesce(revoked_at, $2) WHERE id = $1", id, at)
	if err != nil {
		return mapErr(fmt.Sprintf("revoke api key %s", id), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("revoke api key %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// CountAdminKeys counts unrevoked admin keys.
func (s *Store) CountAdminKeys(ctx context.Context) (int, error) {
	var n int
	err := s.pool.QueryRow(ctx, "SELECT count(*) FROM api_keys WHERE admin AND revoked_at IS NULL").Scan(&n)
	return n, mapErr("count admin keys", err)
}
