package store

import (
	"context"
	"encoding/json"
	"time"
)

// SessionResource is one resource of a Managed Agents session: a file, a
// github_repository or a memory_store mounted into the session's sandbox.
// Doc is what the API shows of it (the SDK's wire fields other than id,
// type and the timestamps); a repository's authorization_token is never in
// Doc: internal/vault's keyring seals it into Secret under KeyID, bound to
// tenant and resource id, so the store never holds it in clear.
type SessionResource struct {
	ID        string
	TenantID  string
	SessionID string
	// Kind is file, github_repository or memory_store.
	Kind string
	// MountPath is where the resource appears in the sandbox; unique within
	// a session.
	MountPath string
	Doc       json.RawMessage
	Secret    []byte
	KeyID     string
	// Version counts writes of Secret; RekeySessionResourceSecret compares
	// it, so a key rotation never puts back a token the API replaced.
	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// SessionResourceStore holds sessions' resources. Tenancy is the caller's
// check (rows carry TenantID), as for the other Managed Agents resources.
type SessionResourceStore interface {
	// CreateSessionResources inserts rs all or none. A mount path another
	// resource of the session has → ErrConflict; an unknown session →
	// ErrNotFound. Zero ids and times are filled in.
	CreateSessionResources(ctx context.Context, rs []*SessionResource) ([]*SessionResource, error)
	GetSessionResource(ctx context.Context, id string) (*SessionResource, error)
	// ListSessionResources lists a session's resources by id, after afterID;
	// limit 0 lists all.
	ListSessionResources(ctx context.Context, sessionID, afterID string, limit int) ([]*SessionResource, error)
	// UpdateSessionResourceSecret replaces Secret and KeyID; Version is
	// then one more.
	UpdateSessionResourceSecret(ctx context.Context, id string, secret []byte, keyID string) (*SessionResource, error)
	// RekeySessionResourceSecret replaces Secret and KeyID if the stored
	// Version is expectedVersion (else ErrVersionMismatch; unknown id →
	// ErrNotFound). UpdatedAt stays: a rotation changes nothing a client
	// sees.
	RekeySessionResourceSecret(ctx context.Context, id string, expectedVersion int64, secret []byte, keyID string) (*SessionResource, error)
	// ListSessionResourcesNotUnderKey pages (by id, after afterID) through
	// every resource of every session that has a sealed secret under a key
	// other than keyID: what a key rotation still has to re-encrypt.
	// limit 0 lists all.
	ListSessionResourcesNotUnderKey(ctx context.Context, keyID, afterID string, limit int) ([]*SessionResource, error)
	DeleteSessionResource(ctx context.Context, id string) error
}
