package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ObjectStatus is a durable object's status (seed 002).
type ObjectStatus string

const (
	ObjectActive      ObjectStatus = "Active"
	ObjectHibernating ObjectStatus = "Hibernating"
)

// ObjectClass is a class registered through the API (classes from
// agentkernel.toml live in configuration, not in the store).
type ObjectClass struct {
	TenantID           string
	Class              string
	Image              string
	Driver             string
	IdleTimeoutSeconds int64
	InitCommand        []string
	MaxConcurrency     int64
	StorageMode        string // "snapshot" or "write-through"
	AppDir             string
	Env                map[string]string
	// Isolation is "" or "object" (a sandbox per object) or "class" (the
	// tenant's objects of the class share sandboxes, ObjectsPerSandbox
	// each at most; 0 = the runtime's default).
	Isolation         string
	ObjectsPerSandbox int64
	CreatedAt         time.Time
	UpdatedAt         time.Time
}

// ObjectBundle records the archive a tenant uploaded as the code of one of
// its API classes. The archive itself is a blob under a content-addressed
// key; this row is what holds that blob (object_bundles.blob_key is in
// BlobKeyColumns), so the blob GC keeps it exactly as long as the row
// exists. Two classes of one tenant that uploaded identical archives hold
// the same key.
type ObjectBundle struct {
	TenantID string
	Class    string
	BlobKey  string
	SHA256   string
	Size     int64
	// UploadedAt is when the archive was uploaded (zero on a put: now).
	UploadedAt time.Time
}

// Validate is the check both engines make before a put (ErrInvalid).
func (b *ObjectBundle) Validate() error {
	if b == nil || b.Class == "" || b.BlobKey == "" || b.SHA256 == "" || b.Size < 0 {
		return fmt.Errorf("object bundle: class, blob key, sha256 and a non-negative size are required: %w", ErrInvalid)
	}
	return nil
}

// ObjectKey addresses one object.
type ObjectKey struct {
	TenantID string
	Class    string
	ID       string
}

// Object is a durable object's record.
type Object struct {
	ObjectKey
	Status    ObjectStatus
	SandboxID string
	// StorageKeys and StorageBytes are the persisted storage's totals (for
	// the 10,000-key and 50 MB limits).
	StorageKeys  int64
	StorageBytes int64
	Version      int64
	LastCallAt   *time.Time
	HibernatedAt *time.Time
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// StorageWrite sets Key to Value, or deletes it when Delete is true.
type StorageWrite struct {
	Key    string
	Value  json.RawMessage
	Delete bool
}

// ListObjectsParams filters a listing; empty fields do not filter.
type ListObjectsParams struct {
	TenantID string
	Class    string
	Status   ObjectStatus
	AfterID  string // continue after this (class, id) pair encoded "class/id"
	Limit    int
}

// Alarm is a scheduled method call on an object. At most one pending
// (Fired == false) alarm exists per (tenant, class, object, method).
type Alarm struct {
	ID string
	ObjectKey
	Method    string
	Args      json.RawMessage
	FireAt    time.Time
	Fired     bool
	Attempts  int64
	LastError string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// AuditRecord is one audit log entry.
type AuditRecord struct {
	ID       string
	TenantID string
	Kind     string // e.g. ObjectCreated, ObjectHibernated, AlarmFailed
	Subject  string // what it is about, e.g. "counter/user-123"
	Data     json.RawMessage
	At       time.Time
}

// ListAuditParams pages through a tenant's audit log, oldest first.
type ListAuditParams struct {
	TenantID string
	Kind     string // "" = every kind
	Subject  string // "" = every subject
	AfterID  string
	Limit    int
}

// ObjectStore holds durable object classes, objects, their storage,
// alarms, and the audit log.
type ObjectStore interface {
	// PutObjectClass creates or replaces a tenant's class.
	PutObjectClass(ctx context.Context, c *ObjectClass) (*ObjectClass, error)
	GetObjectClass(ctx context.Context, tenantID, class string) (*ObjectClass, error)
	ListObjectClasses(ctx context.Context, tenantID string) ([]*ObjectClass, error)
	// DeleteObjectClass removes the class and its bundle row, in one
	// statement.
	DeleteObjectClass(ctx context.Context, tenantID, class string) error

	// PutObjectBundle records b as its class's bundle, replacing the one the
	// class had (the replaced row's blob is then held by no row of its own).
	// ErrNotFound when the tenant has no such class; ErrInvalid without a
	// blob key or sha256, or with a negative size.
	PutObjectBundle(ctx context.Context, b *ObjectBundle) (*ObjectBundle, error)
	// GetObjectBundle returns a class's bundle row or ErrNotFound.
	GetObjectBundle(ctx context.Context, tenantID, class string) (*ObjectBundle, error)
	// ListObjectBundles lists one tenant's bundle rows, by class.
	ListObjectBundles(ctx context.Context, tenantID string) ([]*ObjectBundle, error)
	// DeleteObjectBundle removes a class's bundle row (ErrNotFound when it
	// has none); the class stays.
	DeleteObjectBundle(ctx context.Context, tenantID, class string) error

	// CreateObject inserts an Active object (Version 1); exactly one of
	// concurrent creators wins, the rest get ErrAlreadyExists.
	CreateObject(ctx context.Context, o *Object) (*Object, error)
	GetObject(ctx context.Context, key ObjectKey) (*Object, error)
	ListObjects(ctx context.Context, p ListObjectsParams) ([]*Object, error)
	// SetObjectActive marks a hibernating object Active again with its new
	// sandbox (a wake), bumping Version.
	SetObjectActive(ctx context.Context, key ObjectKey, sandboxID string) (*Object, error)
	// TouchObject sets LastCallAt without bumping Version.
	TouchObject(ctx context.Context, key ObjectKey, at time.Time) error
	// HibernateObject replaces the object's whole storage with storage and
	// sets it Hibernating, in ONE transaction: a crash leaves it Active with
	// its previous storage.
	HibernateObject(ctx context.Context, key ObjectKey, storage map[string]json.RawMessage) (*Object, error)
	// ReplaceObjectStorage replaces the whole storage without a status
	// change (checkpoint), in one transaction.
	ReplaceObjectStorage(ctx context.Context, key ObjectKey, storage map[string]json.RawMessage) (*Object, error)
	// ApplyStorageWrites applies writes in order, in one transaction
	// (write-through mode). Writes to several objects may be batched by the
	// caller through ApplyStorageWriteBatch.
	ApplyStorageWrites(ctx context.Context, key ObjectKey, writes []StorageWrite) (*Object, error)
	// ApplyStorageWriteBatch applies the writes of several objects in ONE
	// transaction (group commit). Either all apply or none.
	ApplyStorageWriteBatch(ctx context.Context, batch map[ObjectKey][]StorageWrite) error
	GetObjectStorage(ctx context.Context, key ObjectKey) (map[string]json.RawMessage, error)
	// DeleteObject removes the object, its storage and its alarms.
	DeleteObject(ctx context.Context, key ObjectKey) error

	// SetAlarm inserts an alarm, replacing the pending alarm for the same
	// (object, method) if there is one (the replaced alarm keeps nothing).
	SetAlarm(ctx context.Context, a *Alarm) (*Alarm, error)
	ListAlarms(ctx context.Context, key ObjectKey) ([]*Alarm, error)
	GetAlarm(ctx context.Context, id string) (*Alarm, error)
	DeleteAlarm(ctx context.Context, id string) error
	// CountPendingAlarms counts an object's unfired alarms.
	CountPendingAlarms(ctx context.Context, key ObjectKey) (int64, error)
	// DueAlarms returns up to limit unfired alarms with FireAt <= now,
	// oldest FireAt first.
	DueAlarms(ctx context.Context, now time.Time, limit int) ([]*Alarm, error)
	// MarkAlarmFired sets Fired (after success, or after the last retry).
	MarkAlarmFired(ctx context.Context, id, lastError string) error
	// RecordAlarmAttempt increments Attempts and records lastError.
	RecordAlarmAttempt(ctx context.Context, id, lastError string) (*Alarm, error)

	AppendAudit(ctx context.Context, r *AuditRecord) error
	ListAudit(ctx context.Context, p ListAuditParams) ([]*AuditRecord, error)
}
