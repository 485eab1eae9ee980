package store

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"time"
)

// This file holds the memory stores of the Managed Agents API: tenant-owned
// sets of text memories (a path and its content) with their full version
// history. Every write of a memory is one transaction that changes the
// memory's row and appends its version, so history and current state never
// disagree; a deleted memory keeps its versions (its id stays valid for
// listing them), deleting the store removes everything.

// MemoryStore is a store of memories.
type MemoryStore struct {
	ID          string
	TenantID    string
	Name        string
	Description string
	Metadata    map[string]string
	ArchivedAt  *time.Time
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// MemoryActor is who wrote (or redacted) a version, in the SDK's actor
// kinds: "session_actor" (ID is the session), "api_actor" (ID is the API
// key's id). The zero value is "not recorded".
type MemoryActor struct {
	Type string
	ID   string
}

// Memory operations recorded on versions.
const (
	MemoryCreated  = "created"
	MemoryModified = "modified"
	MemoryDeleted  = "deleted"
)

// Memory is the current state of one live memory.
type Memory struct {
	ID            string
	TenantID      string
	StoreID       string
	Path          string
	Content       string
	ContentSHA256 string
	SizeBytes     int64
	// VersionID is the version that holds the current content.
	VersionID string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// MemoryVersion is one recorded change of a memory. A redacted version
// keeps its operation, actor and times; path and content are gone.
type MemoryVersion struct {
	ID        string
	TenantID  string
	StoreID   string
	MemoryID  string
	Operation string
	// Path, Content, ContentSHA256 and SizeBytes are empty for a deleted or
	// redacted version (Path stays on a deleted one).
	Path          string
	Content       string
	ContentSHA256 string
	SizeBytes     int64
	CreatedBy     MemoryActor
	RedactedAt    *time.Time
	RedactedBy    MemoryActor
	CreatedAt     time.Time
}

// MemoryWrite is one change of a memory.
type MemoryWrite struct {
	TenantID string
	StoreID  string
	// ID addresses the memory (UpdateMemory, DeleteMemory).
	ID string
	// Path is the memory's path: the new memory's (CreateMemory), the new
	// one on a rename (UpdateMemory; "" keeps it), the one addressed
	// (PutMemoryAtPath).
	Path string
	// Content is the new content; nil keeps it (UpdateMemory) or deletes
	// the memory (PutMemoryAtPath).
	Content *string
	// ExpectSHA256, when set, fails the write with ErrVersionMismatch
	// unless the memory's current content has this digest.
	ExpectSHA256 string
	// DeleteIfVersion, on a deletion by PutMemoryAtPath, deletes the
	// memory only while its current version is this one: a newer version
	// (another writer's) is kept and returned, with false. Checked in the
	// write's transaction, so no write can land in between.
	DeleteIfVersion string
	Actor           MemoryActor
}

// MemoryListParams pages through a store's live memories in bytewise path
// order.
type MemoryListParams struct {
	StoreID string
	// PathPrefix keeps only paths that start with it.
	PathPrefix string
	// AfterPath continues after this path (exclusive).
	AfterPath string
	Limit     int
}

// MemoryVersionListParams pages through a store's versions, newest first.
type MemoryVersionListParams struct {
	StoreID   string
	MemoryID  string
	Operation string
	// Actor keeps only versions written by this actor (when Type is set).
	Actor MemoryActor
	// BeforeID continues after this version in newest-first order.
	BeforeID   string
	CreatedGTE time.Time
	CreatedLTE time.Time
	Limit      int
}

// MemoryDigest is the SDK's content_sha256 (lowercase hex SHA-256 of the
// UTF-8 bytes, no normalisation) and content_size_bytes.
func MemoryDigest(content string) (sha string, size int64) {
	sum := sha256.Sum256([]byte(content))
	return hex.EncodeToString(sum[:]), int64(len(content))
}

// MemoryStores holds memory stores, their memories and versions. Tenancy
// is the caller's check (rows carry TenantID). Writes to a memory of an
// archived store fail with ErrConflict; to a missing store with
// ErrNotFound.
type MemoryStores interface {
	CreateMemoryStore(ctx context.Context, m *MemoryStore) (*MemoryStore, error)
	GetMemoryStore(ctx context.Context, id string) (*MemoryStore, error)
	// UpdateMemoryStore writes Name, Description and Metadata; archived →
	// ErrConflict.
	UpdateMemoryStore(ctx context.Context, m *MemoryStore) (*MemoryStore, error)
	ListMemoryStores(ctx context.Context, p ListResourcesParams) ([]*MemoryStore, error)
	// ArchiveMemoryStore is idempotent (the first time is kept).
	ArchiveMemoryStore(ctx context.Context, id string, at time.Time) (*MemoryStore, error)
	// DeleteMemoryStore deletes the store, its memories and versions.
	DeleteMemoryStore(ctx context.Context, id string) error

	// CreateMemory creates the memory at w.Path with *w.Content and its
	// "created" version; a live memory on that path → ErrAlreadyExists.
	CreateMemory(ctx context.Context, w MemoryWrite) (*Memory, error)
	GetMemory(ctx context.Context, id string) (*Memory, error)
	// UpdateMemory changes w.ID's content and/or path and appends a
	// "modified" version; nothing changed → the memory as it is, no version.
	// A path another live memory has → ErrAlreadyExists.
	UpdateMemory(ctx context.Context, w MemoryWrite) (*Memory, error)
	// DeleteMemory removes w.ID and appends its "deleted" version.
	DeleteMemory(ctx context.Context, w MemoryWrite) error
	// PutMemoryAtPath makes the memory at w.Path hold *w.Content (creating
	// it) or, with nil Content, deletes it. A write that changes nothing
	// (same content; already absent) records no version and reports false,
	// which is what makes a repeated sync a no-op. The memory is nil after a
	// delete; a deletion refused by DeleteIfVersion returns the memory kept.
	PutMemoryAtPath(ctx context.Context, w MemoryWrite) (*Memory, bool, error)
	ListMemories(ctx context.Context, p MemoryListParams) ([]*Memory, error)

	GetMemoryVersion(ctx context.Context, id string) (*MemoryVersion, error)
	ListMemoryVersions(ctx context.Context, p MemoryVersionListParams) ([]*MemoryVersion, error)
	// RedactMemoryVersion clears a version's path and content (idempotent:
	// the first redaction is kept). The version holding a live memory's
	// current content → ErrConflict: the memory would show content its
	// history no longer has.
	RedactMemoryVersion(ctx context.Context, id string, by MemoryActor, at time.Time) (*MemoryVersion, error)
}
