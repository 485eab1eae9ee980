// Package vault keeps the secrets of Managed Agents vault credentials:
// sealed at rest with AES-256-GCM under keys the operator holds in a key
// file, opened only for what uses them (the egress proxy's substitutions,
// an MCP server's Authorization header), refreshed before an OAuth access
// token expires, and re-encrypted by a key rotation. A secret never leaves
// this package in a response, a log line or an error.
package vault

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"golang.org/x/sync/singleflight"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Config configures a Service.
type Config struct {
	Store store.VaultStore
	// Resources, when set, has the session resource tokens a key rotation
	// re-seals with the credentials (the CLI's rotate-key sets it).
	Resources ResourceTokens
	Keys      *Keyring
	Log       *slog.Logger
	// HTTPClient reaches token endpoints and MCP servers (default: 30 s
	// timeout).
	HTTPClient *http.Client
	// Now is the clock (tests use a fake one).
	Now func() time.Time
	// RefreshMargin: an OAuth access token that expires within it is
	// refreshed before use (default 5 minutes).
	RefreshMargin time.Duration
}

// Service is the vault as the rest of the daemon uses it.
type Service struct {
	st     store.VaultStore
	res    ResourceTokens
	keys   *Keyring
	log    *slog.Logger
	client *http.Client
	now    func() time.Time
	margin time.Duration
	// refreshing makes concurrent users of one credential share a refresh:
	// a token endpoint that rotates refresh tokens accepts each only once.
	refreshing singleflight.Group
}

// New builds the service.
func New(c Config) *Service {
	s := &Service{st: c.Store, res: c.Resources, keys: c.Keys, log: c.Log, client: c.HTTPClient, now: c.Now, margin: c.RefreshMargin}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.client == nil {
		s.client = &http.Client{Timeout: 30 * time.Second}
	}
	if s.now == nil {
		s.now = func() time.Time { return time.Now().UTC() }
	}
	if s.margin <= 0 {
		s.margin = 5 * time.Minute
	}
	return s
}

// Keys is the service's keyring.
func (s *Service) Keys() *Keyring { return s.keys }

// Now is the service's clock.
func (s *Service) Now() time.Time { return s.now() }

func (s *Service) seal(tenantID, credentialID string, sec Secrets) ([]byte, string, error) {
	b, err := json.Marshal(sealedSecrets(sec))
	if err != nil {
		return nil, "", err
	}
	return s.keys.Seal(tenantID, credentialID, b)
}

// Secrets opens a credential's secrets.
func (s *Service) Secrets(c *store.VaultCredential) (Secrets, error) {
	b, err := s.keys.Open(c.TenantID, c.ID, c.KeyID, c.Secret)
	if err != nil {
		return Secrets{}, err
	}
	var sec sealedSecrets
	if err := json.Unmarshal(b, &sec); err != nil {
		return Secrets{}, fmt.Errorf("credential %s: sealed secret is not what this version seals", c.ID)
	}
	return Secrets(sec), nil
}

// Create seals sec and stores a new credential of doc in the vault.
func (s *Service) Create(ctx context.Context, tenantID, vaultID string, doc Doc, sec Secrets) (*store.VaultCredential, error) {
	id := ids.New("vcrd")
	sealed, keyID, err := s.seal(tenantID, id, sec)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	return s.st.CreateVaultCredential(ctx, &store.VaultCredential{ID: id, TenantID: tenantID, VaultID: vaultID,
		Kind: doc.Auth.Type, Doc: body, Secret: sealed, KeyID: keyID})
}

// Update writes doc and sec over cur (at cur's version: a concurrent write
// makes it fail with store.ErrVersionMismatch rather than be lost).
func (s *Service) Update(ctx context.Context, cur *store.VaultCredential, doc Doc, sec Secrets) (*store.VaultCredential, error) {
	sealed, keyID, err := s.seal(cur.TenantID, cur.ID, sec)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	next := *cur
	next.Doc, next.Secret, next.KeyID = body, sealed, keyID
	return s.st.UpdateVaultCredential(ctx, &next)
}

// ArchivedError is a vault that exists but is archived; it unwraps to
// store.ErrInvalid (a session may not name it).
type ArchivedError struct{ VaultID string }

func (e *ArchivedError) Error() string {
	return fmt.Sprintf("vault %q is archived; an archived vault's credentials are not used", e.VaultID)
}

func (e *ArchivedError) Unwrap() error { return store.ErrInvalid }

// CheckVaults checks that every id names a live vault of the tenant: an
// unknown one, or another tenant's, is an error wrapping store.ErrNotFound
// that names it; an archived one an *ArchivedError.
func (s *Service) CheckVaults(ctx context.Context, tenantID string, vaultIDs []string) error {
	for _, id := range vaultIDs {
		v, err := s.st.GetVault(ctx, id)
		if errors.Is(err, store.ErrNotFound) || err == nil && v.TenantID != tenantID {
			return fmt.Errorf("vault %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return err
		}
		if v.ArchivedAt != nil {
			return &ArchivedError{VaultID: id}
		}
	}
	return nil
}

// EnvCredentials are the live environment_variable credentials of the
// vaults, opened, as the egress proxy substitutes them. When two name the
// same variable, the one in the earlier vault wins.
func (s *Service) EnvCredentials(ctx context.Context, tenantID string, vaultIDs []string) ([]egress.Credential, error) {
	rows, err := s.st.ListVaultCredentialsIn(ctx, tenantID, vaultIDs)
	if err != nil {
		return nil, err
	}
	var out []egress.Credential
	seen := map[string]bool{}
	for _, c := range rows {
		if c.Kind != KindEnvVar {
			continue
		}
		doc, err := DecodeDoc(c)
		if err != nil {
			return nil, err
		}
		if seen[doc.Auth.SecretName] {
			continue
		}
		seen[doc.Auth.SecretName] = true
		sec, err := s.Secrets(c)
		if err != nil {
			return nil, err
		}
		hosts, err := hostsOf(doc.Auth.Networking)
		if err != nil {
			return nil, fmt.Errorf("credential %s: stored allowed_hosts: %w", c.ID, err)
		}
		inj := Injection{Header: true}
		if doc.Auth.InjectionLocation != nil {
			inj = *doc.Auth.InjectionLocation
		}
		out = append(out, egress.Credential{ID: c.ID, EnvVar: doc.Auth.SecretName, Placeholder: egress.Placeholder(c.ID),
			Value: sec.Value, Header: inj.Header, Body: inj.Body, Hosts: hosts})
	}
	return out, nil
}

// MCPAuthorization is the bearer token for an MCP server from the vaults:
// the first static_bearer or mcp_oauth credential for serverURL, in vault
// order; an OAuth access token near its expiry is refreshed first. "" when
// no credential is for the server.
func (s *Service) MCPAuthorization(ctx context.Context, tenantID string, vaultIDs []string, serverURL string) (string, error) {
	rows, err := s.st.ListVaultCredentialsIn(ctx, tenantID, vaultIDs)
	if err != nil {
		return "", err
	}
	for _, c := range rows {
		if c.Kind != KindStaticBearer && c.Kind != KindMCPOAuth {
			continue
		}
		doc, err := DecodeDoc(c)
		if err != nil {
			return "", err
		}
		if !SameServer(doc.Auth.MCPServerURL, serverURL) {
			continue
		}
		if c.Kind == KindStaticBearer {
			sec, err := s.Secrets(c)
			return sec.Token, err
		}
		_, sec, err := s.Fresh(ctx, c)
		if err != nil {
			return "", err
		}
		return sec.AccessToken, nil
	}
	return "", nil
}
