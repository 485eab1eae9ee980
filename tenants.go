package agentkernel

import (
	"context"
	"net/http"
	"time"
)

// Tenant owns resources; keys belong to exactly one tenant.
type Tenant struct {
	ID        string    `json:"id"`
	Type      string    `json:"type"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"created_at"`
}

// TenantCreateParams creates a tenant.
type TenantCreateParams struct {
	Name string `json:"name"`
}

// TenantsService manages tenants (admin only).
type TenantsService struct{ c *Client }

// Create makes a tenant.
func (s *TenantsService) Create(ctx context.Context, p TenantCreateParams) (*Tenant, error) {
	var t Tenant
	if err := s.c.do(ctx, http.MethodPost, "/v1/tenants", p, &t); err != nil {
		return nil, err
	}
	return &t, nil
}

// List returns every tenant.
func (s *TenantsService) List(ctx context.Context) ([]Tenant, error) {
	var out struct {
		Data []Tenant `json:"data"`
	}
	if err := s.c.do(ctx, http.MethodGet, "/v1/tenants", nil, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}
