package store

import (
	"context"
	"encoding/json"
	"time"
)

// This file holds the vaults of the Managed Agents API and their
// credentials. A credential row keeps what may be shown (its kind, display
// name, metadata and the auth fields that are not secret, as a JSON
// document) apart from what may not: the secret fields, sealed by
// internal/vault into Secret under the key named by KeyID. The store never
// sees a secret in clear.

// Vault holds credentials for sessions. Doc is the vault's body
// (display_name, metadata) in the SDK's wire shape.
type Vault struct {
	ID         string
	TenantID   string
	Doc        json.RawMessage
	ArchivedAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// VaultCredential is one credential of a vault.
type VaultCredential struct {
	ID       string
	TenantID string
	VaultID  string
	// Kind is the auth type: static_bearer, mcp_oauth, environment_variable.
	Kind string
	// Doc is the non-secret part (display_name, metadata, auth without its
	// secret fields).
	Doc json.RawMessage
	// Secret is the sealed secret fields; KeyID names the key that sealed it.
	Secret []byte
	KeyID  string
	// Version counts writes; UpdateVaultCredential and RekeyVaultCredential
	// compare it, so a refresh and a key rotation never lose each other's
	// write.
	Version    int64
	ArchivedAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// VaultStore holds vaults and their credentials. Tenancy is the caller's
// check (rows carry TenantID), as for the other Managed Agents resources.
type VaultStore interface {
	CreateVault(ctx context.Context, v *Vault) (*Vault, error)
	GetVault(ctx context.Context, id string) (*Vault, error)
	// UpdateVault replaces the doc; archived → ErrConflict.
	UpdateVault(ctx context.Context, id string, doc json.RawMessage) (*Vault, error)
	ListVaults(ctx context.Context, p ListResourcesParams) ([]*Vault, error)
	// ArchiveVault archives the vault and every credential in it (archiving
	// twice keeps the first time).
	ArchiveVault(ctx context.Context, id string, at time.Time) (*Vault, error)
	// DeleteVault deletes the vault and its credentials.
	DeleteVault(ctx context.Context, id string) error

	// CreateVaultCredential: unknown vault → ErrNotFound; archived vault →
	// ErrConflict. Version starts at 1.
	CreateVaultCredential(ctx context.Context, c *VaultCredential) (*VaultCredential, error)
	GetVaultCredential(ctx context.Context, id string) (*VaultCredential, error)
	// UpdateVaultCredential writes Doc, Secret and KeyID if the stored
	// Version is c.Version (else ErrVersionMismatch) and the credential is
	// not archived (else ErrConflict); Version is then c.Version+1.
	UpdateVaultCredential(ctx context.Context, c *VaultCredential) (*VaultCredential, error)
	// RekeyVaultCredential replaces Secret and KeyID (archived or not) if
	// the stored Version is expectedVersion (else ErrVersionMismatch).
	RekeyVaultCredential(ctx context.Context, id string, expectedVersion int64, secret []byte, keyID string) (*VaultCredential, error)
	// ListVaultCredentials pages through p.VaultID's credentials by id.
	ListVaultCredentials(ctx context.Context, p ListResourcesParams) ([]*VaultCredential, error)
	// ListVaultCredentialsIn lists the credentials of the given vaults of a
	// tenant that are not archived, ordered by vault (as given) then id.
	ListVaultCredentialsIn(ctx context.Context, tenantID string, vaultIDs []string) ([]*VaultCredential, error)
	// ListCredentialsNotUnderKey pages (by id, after afterID) through every
	// credential of every tenant, archived too, whose KeyID is not keyID:
	// what a key rotation still has to re-encrypt.
	ListCredentialsNotUnderKey(ctx context.Context, keyID, afterID string, limit int) ([]*VaultCredential, error)
	ArchiveVaultCredential(ctx context.Context, id string, at time.Time) (*VaultCredential, error)
	DeleteVaultCredential(ctx context.Context, id string) error
	// AnnounceCredentialRefreshFailed writes the outbox rows of
	// vault_credential.refresh_failed for the credential (a failed refresh
	// changes no row: the announcement is all it writes). A missing
	// credential → ErrNotFound.
	AnnounceCredentialRefreshFailed(ctx context.Context, id string, at time.Time) error
}
