package store

import (
	"context"
	"encoding/json"
	"time"
)

// SessionStatus is the seed-004 status of a session's state machine. (The
// Managed Agents status — idle/running/rescheduling/terminated — is derived
// elsewhere from run rows and timestamps; this is the runtime's own status.)
type SessionStatus string

const (
	StatusActive      SessionStatus = "active"
	StatusCompleted   SessionStatus = "completed"
	StatusFailed      SessionStatus = "failed"
	StatusInterrupted SessionStatus = "interrupted"
	StatusPaused      SessionStatus = "paused"
)

// Valid reports whether s is one of the known statuses.
func (s SessionStatus) Valid() bool {
	switch s {
	case StatusActive, StatusCompleted, StatusFailed, StatusInterrupted, StatusPaused:
		return true
	}
	return false
}

// Session is the persisted session state (seed 004 "SessionState").
//
// Version is monotonic and increments on every modification of the session:
// state saves, status changes, counters, custom-state merges, message appends
// and truncation, staging promotion and checkpoint creation. Staging changes
// (before promotion) and the interrupt flag are side channels and do not bump
// it, so a runtime polling its interrupt flag never invalidates its own
// expectedVersion.
type Session struct {
	ID          string
	TenantID    string
	AgentType   string
	Status      SessionStatus
	StepCount   int64
	ResumeCount int64
	Version     int64

	// CustomState is the application's JSON object state.
	CustomState json.RawMessage
	// Runtime holds the runtime's own JSON fields (output, error context,
	// pending client tool calls, suspension markers, tracing context, …) that
	// the store keeps opaque.
	Runtime json.RawMessage

	Error            string
	FailureReason    string
	InterruptContext json.RawMessage

	// CheckpointID is the pointer to the most recently written checkpoint.
	CheckpointID     string
	CheckpointedAt   *time.Time
	CheckpointSource CheckpointSource

	ParentSessionID string
	RootSessionID   string
	Metadata        map[string]string
	Tags            []string

	ExpiresAt *time.Time
	CreatedAt time.Time
	UpdatedAt time.Time
}

// SessionState is the writable part of a session, as passed to SaveState and
// SaveStateAndPromoteStaging. Fields not listed here (identity, counters,
// version, checkpoint pointer, timestamps) are owned by the store.
type SessionState struct {
	Status           SessionStatus
	CustomState      json.RawMessage
	Runtime          json.RawMessage
	StepCount        int64
	Error            string
	FailureReason    string
	InterruptContext json.RawMessage
	Metadata         map[string]string
	Tags             []string
	ExpiresAt        *time.Time
}

// CheckpointSource says which write path produced a checkpoint.
type CheckpointSource string

const (
	CheckpointSourceSave    CheckpointSource = "save"
	CheckpointSourceStaging CheckpointSource = "staging"
	// CheckpointSourceStep: a Managed Agents step or turn boundary
	// (BranchStore.CommitStep, EndTurn), a fork's or a rewind's start.
	CheckpointSourceStep CheckpointSource = "step"
)

// CreateSessionParams creates a session. Exactly one of N concurrent creators
// with the same ID wins; the others get ErrAlreadyExists.
type CreateSessionParams struct {
	ID              string
	TenantID        string
	AgentType       string
	CustomState     json.RawMessage // default {}
	Runtime         json.RawMessage // default {}
	ParentSessionID string
	RootSessionID   string
	Metadata        map[string]string
	Tags            []string
	ExpiresAt       *time.Time
}

// SaveStateParams overwrites the writable state. ExpectedVersion, when
// non-nil, makes the write conditional (StaleStateError on mismatch).
// When Checkpoint is non-nil a checkpoint is written in the same transaction
// and the session's pointer moves to it.
type SaveStateParams struct {
	SessionID       string
	State           SessionState
	ExpectedVersion *int64
	Checkpoint      *CheckpointMeta
}

// UpdateStatusParams sets the status unconditionally (no CAS).
type UpdateStatusParams struct {
	SessionID        string
	Status           SessionStatus
	Error            *string
	InterruptContext json.RawMessage
}

// CompareAndSetStatusParams sets Status to New only if the current status is
// one of Expected and, when ExpectedVersion is non-nil, the version matches.
type CompareAndSetStatusParams struct {
	SessionID        string
	Expected         []SessionStatus
	New              SessionStatus
	ExpectedVersion  *int64
	Error            *string
	InterruptContext json.RawMessage
}

// CASResult is the discriminated result of CompareAndSetStatus. A mismatch is
// not an error: OK is false and Current* say what was found.
type CASResult struct {
	OK             bool
	NewVersion     int64
	CurrentStatus  SessionStatus
	CurrentVersion int64
}

// CheckpointMeta describes a checkpoint to write. ID is generated when empty.
type CheckpointMeta struct {
	ID        string
	StepCount int64
	RunID     string
	Metadata  json.RawMessage
	// Workspace is the workspace snapshot taken at this boundary (issue 13).
	Workspace string
}

// SaveAndPromoteParams is the one atomic primitive of seed 004 (invariant
// C-1): in ONE transaction it checks ExpectedVersion, writes State, appends
// AppendMessages, promotes every staged change of the session (its messages
// after AppendMessages, its custom-state writes merged), creates the
// checkpoint and moves the session's checkpoint pointer to it. On a stale
// version nothing at all is written.
type SaveAndPromoteParams struct {
	SessionID       string
	State           SessionState
	AppendMessages  []NewMessage
	Checkpoint      CheckpointMeta
	ExpectedVersion *int64
}

// SaveAndPromoteResult reports what the transaction wrote.
type SaveAndPromoteResult struct {
	NewVersion     int64
	Checkpoint     Checkpoint
	PromotedStages int
	MessageCount   int64
}

// InterruptFlag is the durable interrupt request of a session.
type InterruptFlag struct {
	Set    bool
	Reason string
	SetAt  *time.Time
}

// CloneSessionParams creates NewID from FromID. With CheckpointID set it is a
// branch: state comes from that checkpoint's snapshot and messages are copied
// up to the checkpoint's message count; otherwise the current state and all
// messages are copied. Runs, staging and the interrupt flag are not copied.
type CloneSessionParams struct {
	FromID       string
	NewID        string
	CheckpointID string
	TenantID     string // default: the source's tenant
}

// SessionStore holds the seed-004 primitives.
type SessionStore interface {
	CreateSession(ctx context.Context, p CreateSessionParams) (*Session, error)
	GetSession(ctx context.Context, id string) (*Session, error)
	SessionExists(ctx context.Context, id string) (bool, error)
	// SaveState writes state (and optionally a checkpoint) and returns the new
	// session.
	SaveState(ctx context.Context, p SaveStateParams) (*Session, error)
	// MergeCustomState merges the top-level keys of patch (a JSON object) into
	// the custom state; a null value deletes the key. Returns the new version.
	MergeCustomState(ctx context.Context, id string, patch json.RawMessage) (int64, error)
	UpdateStatus(ctx context.Context, p UpdateStatusParams) (int64, error)
	CompareAndSetStatus(ctx context.Context, p CompareAndSetStatusParams) (CASResult, error)
	SaveStateAndPromoteStaging(ctx context.Context, p SaveAndPromoteParams) (SaveAndPromoteResult, error)
	IncrementStepCount(ctx context.Context, id string) (int64, error)
	IncrementResumeCount(ctx context.Context, id string) (int64, error)
	// DeleteSession removes the session and everything it owns.
	DeleteSession(ctx context.Context, id string) error
	CloneSession(ctx context.Context, p CloneSessionParams) (*Session, error)
	// DeleteExpiredSessions removes sessions whose ExpiresAt is before now.
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int, error)
	ListSessions(ctx context.Context, p ListSessionsParams) ([]*Session, error)

	SetInterruptFlag(ctx context.Context, id, reason string) error
	// CheckInterruptFlag atomically reads and clears the flag: of N
	// concurrent callers after one set, exactly one sees Set == true.
	CheckInterruptFlag(ctx context.Context, id string) (InterruptFlag, error)
	ClearInterruptFlag(ctx context.Context, id string) error

	MessageStore
	RunStore
	CheckpointStore
	StagingStore
	SubSessionStore
}

// ListSessionsParams pages through a tenant's sessions, newest first.
type ListSessionsParams struct {
	TenantID string
	// AfterID continues a listing after this session id (exclusive).
	AfterID string
	Limit   int
}
