package store

import (
	"context"
	"time"
)

// Tenant owns resources; one tenant never sees another's.
type Tenant struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// APIKey is a stored key. Only the sha256 hash of the secret is kept; Prefix
// is the first characters of the secret, shown to people to tell keys apart.
type APIKey struct {
	ID       string
	TenantID string
	Name     string
	Prefix   string
	Hash     string // hex sha256 of the full secret
	Admin    bool
	// EnvironmentID: an environment key (issue 16), scoped to that
	// self_hosted environment's work queue and its sessions; "" for a
	// tenant key.
	EnvironmentID string
	CreatedAt     time.Time
	RevokedAt     *time.Time
	LastUsedAt    *time.Time
}

// CreateAPIKeyParams creates a key. ID is generated when empty.
type CreateAPIKeyParams struct {
	ID       string
	TenantID string
	Name     string
	Prefix   string
	Hash     string
	Admin    bool
	// EnvironmentID makes an environment key (see APIKey).
	EnvironmentID string
}

// TenantStore holds tenants and API keys.
type TenantStore interface {
	// CreateTenant: ErrAlreadyExists when the id or the name is taken.
	CreateTenant(ctx context.Context, t Tenant) (*Tenant, error)
	GetTenant(ctx context.Context, id string) (*Tenant, error)
	GetTenantByName(ctx context.Context, name string) (*Tenant, error)
	ListTenants(ctx context.Context) ([]*Tenant, error)

	CreateAPIKey(ctx context.Context, p CreateAPIKeyParams) (*APIKey, error)
	// GetAPIKeyByHash returns the key (revoked or not) with that hash.
	GetAPIKeyByHash(ctx context.Context, hash string) (*APIKey, error)
	GetAPIKey(ctx context.Context, id string) (*APIKey, error)
	// ListAPIKeys lists a tenant's keys, or every key when tenantID is "".
	ListAPIKeys(ctx context.Context, tenantID string) ([]*APIKey, error)
	// RevokeAPIKey sets RevokedAt; revoking twice is not an error.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error
	// CountAdminKeys counts unrevoked admin keys (for first-start bootstrap).
	CountAdminKeys(ctx context.Context) (int, error)
}
