package store

import (
	"context"
	"time"
)

// File is one file of the Files API (/v1/files): its bytes live in the
// blob store under BlobKey, written before the row, so a row always
// names a complete blob whose sha256 and size it records.
type File struct {
	ID       string
	TenantID string
	// Filename is the last path component the client sent.
	Filename string
	MimeType string
	// SizeBytes and SHA256 (lowercase hex) are those of the stored bytes.
	SizeBytes int64
	SHA256    string
	BlobKey   string
	// Downloadable is the SDK's flag: whether GET /content serves the
	// bytes. Files a user uploads are not (as the hosted API does it);
	// files a session produced are.
	Downloadable bool
	// ScopeSessionID is the session the file belongs to ("" for none):
	// the SDK's scope {type: session, id}.
	ScopeSessionID string
	// ExpiresAt is when the bytes become unavailable (nil: never).
	ExpiresAt *time.Time
	CreatedAt time.Time
}

// ListFilesParams pages through a tenant's files by id (ids are
// time-ordered), newest first when Descending. AfterID/BeforeID are
// exclusive. A non-empty ScopeSessionID keeps that session's files only;
// a non-empty IDs keeps only those ids (the SDK's ids filter).
type ListFilesParams struct {
	TenantID       string
	ScopeSessionID string
	IDs            []string
	AfterID        string
	BeforeID       string
	Limit          int
	Descending     bool
	// LiveAt, when set, leaves out files expired at that time — in the
	// query, so a page of Limit rows is a page of live files.
	LiveAt time.Time
}

// FileStore holds Files rows. Every call is scoped to a tenant: another
// tenant's file is ErrNotFound, exactly like a missing one.
type FileStore interface {
	// CreateFile inserts f; an id that exists → ErrAlreadyExists. Zero
	// CreatedAt becomes now.
	CreateFile(ctx context.Context, f *File) (*File, error)
	GetFile(ctx context.Context, tenantID, id string) (*File, error)
	ListFiles(ctx context.Context, p ListFilesParams) ([]*File, error)
	// DeleteFile deletes the row and returns it (its BlobKey is the
	// caller's to delete); missing → ErrNotFound.
	DeleteFile(ctx context.Context, tenantID, id string) (*File, error)
	// ListExpiredFiles lists up to limit files of every tenant whose
	// ExpiresAt is at or before now, soonest expired first: what the
	// files reaper deletes.
	ListExpiredFiles(ctx context.Context, now time.Time, limit int) ([]*File, error)
}
