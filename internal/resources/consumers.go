package resources

import (
	"context"
	"io"
)

// FileInfo is what the resources layer needs of a File (store.File of the
// files part).
type FileInfo struct {
	ID        string
	Filename  string
	SizeBytes int64
	SHA256    string
}

// Files is the part of the files service (internal/files) resources use:
// an adapter over *files.Service implements it. A file of another tenant
// is store.ErrNotFound.
type Files interface {
	Get(ctx context.Context, tenantID, id string) (FileInfo, error)
	Open(ctx context.Context, tenantID, id string) (io.ReadCloser, FileInfo, error)
	// CreateOutput stores body as a File scoped to the session
	// (files.CreateParams{ScopeSessionID: sessionID, Downloadable: true}).
	CreateOutput(ctx context.Context, tenantID, sessionID, filename string, body io.Reader) (FileInfo, error)
	ListBySession(ctx context.Context, tenantID, sessionID string) ([]FileInfo, error)
}

// MemoryEntry is one live memory of a store (memory.Entry).
type MemoryEntry struct {
	Path, Content, MemoryID, VersionID string
}

// MemoryChange is one change of a mounted store (memory.Change): Content
// nil is a deletion, BaseVersionID "" a new memory.
type MemoryChange struct {
	Path          string
	Content       *string
	BaseVersionID string
}

// MemoryStoreInfo is what a memory_store resource snapshots at attach time.
type MemoryStoreInfo struct {
	ID, Name, Description string
	Archived              bool
}

// Memory is the part of the memory service (internal/memory) resources
// use; an adapter over *memory.Service implements it.
type Memory interface {
	GetStore(ctx context.Context, tenantID, storeID string) (MemoryStoreInfo, error)
	Snapshot(ctx context.Context, tenantID, storeID string) ([]MemoryEntry, error)
	// Sync writes changes as versions by sessionID (memory.Actor).
	Sync(ctx context.Context, tenantID, storeID, sessionID string, changes []MemoryChange) ([]MemoryEntry, error)
}

// Sealer seals repository tokens (*vault.Keyring).
type Sealer interface {
	Seal(tenantID, id string, plaintext []byte) ([]byte, string, error)
	Open(tenantID, id, keyID string, sealed []byte) ([]byte, error)
}
