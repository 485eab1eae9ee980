package agentkernel

import (
	"context"
	"net/http"
	"net/url"
	"time"
)

// APIKey describes a key. Secret is only set in the answer to Create.
type APIKey struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	TenantID string `json:"tenant_id"`
	Name     string `json:"name"`
	Prefix   string `json:"prefix"`
	Admin    bool   `json:"admin"`
	// EnvironmentID: an environment key (the credential of a self_hosted
	// environment's workers); nil for a tenant key.
	EnvironmentID *string    `json:"environment_id"`
	CreatedAt     time.Time  `json:"created_at"`
	RevokedAt     *time.Time `json:"revoked_at,omitempty"`
	Secret        string     `json:"secret,omitempty"`
}

// KeyCreateParams creates a key. TenantID defaults to the caller's tenant.
type KeyCreateParams struct {
	Name     string `json:"name"`
	TenantID string `json:"tenant_id,omitempty"`
	Admin    bool   `json:"admin,omitempty"`
	// EnvironmentID makes an environment key of that self_hosted
	// environment: it reaches the environment's work queue and its
	// sessions' events only.
	EnvironmentID string `json:"environment_id,omitempty"`
}

// KeysService manages API keys.
type KeysService struct{ c *Client }

// Create makes a key and returns it with its secret (shown only once).
func (s *KeysService) Create(ctx context.Context, p KeyCreateParams) (*APIKey, error) {
	var k APIKey
	if err := s.c.do(ctx, http.MethodPost, "/v1/keys", p, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// List returns the keys the caller may see.
func (s *KeysService) List(ctx context.Context) ([]APIKey, error) {
	var out struct {
		Data []APIKey `json:"data"`
	}
	if err := s.c.do(ctx, http.MethodGet, "/v1/keys", nil, &out); err != nil {
		return nil, err
	}
	return out.Data, nil
}

// Get returns one key.
func (s *KeysService) Get(ctx context.Context, id string) (*APIKey, error) {
	var k APIKey
	if err := s.c.do(ctx, http.MethodGet, "/v1/keys/"+url.PathEscape(id), nil, &k); err != nil {
		return nil, err
	}
	return &k, nil
}

// Revoke revokes a key; requests with it are refused from then on.
func (s *KeysService) Revoke(ctx context.Context, id string) (*APIKey, error) {
	var k APIKey
	if err := s.c.do(ctx, http.MethodDelete, "/v1/keys/"+url.PathEscape(id), nil, &k); err != nil {
		return nil, err
	}
	return &k, nil
}
