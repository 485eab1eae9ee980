package store

import (
	"context"
	"encoding/json"
	"time"
)

// NewMessage is a message to append. Content is an opaque JSON value.
type NewMessage struct {
	Role    string
	Content json.RawMessage
}

// Message is a stored message. Seq is 1-based and dense within a session.
type Message struct {
	SessionID string
	Seq       int64
	Role      string
	Content   json.RawMessage
	CreatedAt time.Time
}

// GetMessagesParams pages through messages in Seq order. Seq > AfterSeq;
// Limit <= 0 means all.
type GetMessagesParams struct {
	SessionID string
	AfterSeq  int64
	Limit     int
}

// MessageStore: messages are stored once per session (seed 004).
type MessageStore interface {
	// AppendMessages appends in order and returns the Seq of the last one.
	AppendMessages(ctx context.Context, sessionID string, msgs []NewMessage) (int64, error)
	GetMessages(ctx context.Context, p GetMessagesParams) ([]Message, error)
	CountMessages(ctx context.Context, sessionID string) (int64, error)
	// TruncateMessages keeps the first keep messages and deletes the rest.
	TruncateMessages(ctx context.Context, sessionID string, keep int64) error
}

// RunStatus is the status of one execution (turn) within a session.
type RunStatus string

const (
	RunRunning                   RunStatus = "running"
	RunCompleted                 RunStatus = "completed"
	RunFailed                    RunStatus = "failed"
	RunInterrupted               RunStatus = "interrupted"
	RunSuspendedClientTool       RunStatus = "suspended_client_tool"
	RunSuspendedAwaitingChildren RunStatus = "suspended_awaiting_children"
	RunSuspendedStepPartial      RunStatus = "suspended_step_partial"
)

// Valid reports whether s is one of the known run statuses.
func (s RunStatus) Valid() bool {
	switch s {
	case RunRunning, RunCompleted, RunFailed, RunInterrupted,
		RunSuspendedClientTool, RunSuspendedAwaitingChildren, RunSuspendedStepPartial:
		return true
	}
	return false
}

// Run is the record every turn writes.
type Run struct {
	ID            string
	SessionID     string
	Seq           int64 // 1-based order of runs within the session
	Status        RunStatus
	StartSequence int64 // stream sequence at which the run started
	Error         string
	Metadata      json.RawMessage
	CreatedAt     time.Time
	UpdatedAt     time.Time
	CompletedAt   *time.Time
	// Usage is the turn's token usage (Managed Agents sessions); nil for
	// runs that record none.
	Usage json.RawMessage
	// CheckpointID is the checkpoint the run ended at.
	CheckpointID string
}

// CreateRunParams creates a run. ID is generated when empty.
type CreateRunParams struct {
	ID            string
	SessionID     string
	StartSequence int64
	Metadata      json.RawMessage
}

// UpdateRunStatusParams moves a run to Status.
type UpdateRunStatusParams struct {
	RunID  string
	Status RunStatus
	Error  string
}

// RunStore holds run records.
type RunStore interface {
	CreateRun(ctx context.Context, p CreateRunParams) (*Run, error)
	UpdateRunStatus(ctx context.Context, p UpdateRunStatusParams) (*Run, error)
	// GetCurrentRun returns the session's most recently created run.
	GetCurrentRun(ctx context.Context, sessionID string) (*Run, error)
	// ListRuns returns the session's runs in creation order.
	ListRuns(ctx context.Context, sessionID string) ([]*Run, error)
	GetRun(ctx context.Context, runID string) (*Run, error)
}

// Checkpoint is a committed boundary of a session: its state snapshot and the
// number of messages that belong to it.
type Checkpoint struct {
	ID           string
	SessionID    string
	StepCount    int64
	MessageCount int64
	// Version is the session version written by the transaction that created
	// the checkpoint.
	Version  int64
	RunID    string
	Source   CheckpointSource
	State    SessionState
	Metadata json.RawMessage
	// Workspace is the workspace snapshot taken at this boundary ("" when
	// none was: the session had no sandbox, or it is not a Managed Agents
	// session).
	Workspace string
	CreatedAt time.Time
}

// CheckpointStore holds checkpoints.
type CheckpointStore interface {
	// CreateCheckpoint snapshots the session's current state and message count
	// and moves the session's pointer to it (bumping the version).
	CreateCheckpoint(ctx context.Context, sessionID string, meta CheckpointMeta) (*Checkpoint, error)
	GetCheckpoint(ctx context.Context, sessionID, checkpointID string) (*Checkpoint, error)
	// GetLatestCheckpoint returns the checkpoint the session's pointer
	// references — the most recently written — not the highest StepCount.
	// It falls back to the newest by creation order only when the pointer is
	// absent or dangling. ErrNotFound when the session has none.
	GetLatestCheckpoint(ctx context.Context, sessionID string) (*Checkpoint, error)
	// ListCheckpoints returns checkpoints in creation order.
	ListCheckpoints(ctx context.Context, sessionID string) ([]*Checkpoint, error)
}

// StagedChange is a step's uncommitted output: messages to append and
// custom-state writes to merge when promoted.
type StagedChange struct {
	SessionID   string
	StepID      string
	Messages    []NewMessage
	StateWrites json.RawMessage // JSON object merged into custom state
	CreatedAt   time.Time
}

// StagingStore holds staged changes.
type StagingStore interface {
	// StageChanges records (or replaces) the staged change for (session, step).
	StageChanges(ctx context.Context, c StagedChange) error
	// GetStagedChanges returns the session's staged changes in staging order.
	GetStagedChanges(ctx context.Context, sessionID string) ([]StagedChange, error)
	// PromoteStaging applies every staged change of the session in one
	// transaction and returns how many were promoted.
	PromoteStaging(ctx context.Context, sessionID string) (int, error)
	DiscardStaging(ctx context.Context, sessionID string) error
	HasStagedChanges(ctx context.Context, sessionID string) (bool, error)
	// CleanupOrphanedStaging removes staged changes created before olderThan,
	// and those whose session no longer exists. Returns how many were removed.
	CleanupOrphanedStaging(ctx context.Context, olderThan time.Time) (int, error)
}

// SubSessionRef links a parent session to a sub-agent's session.
type SubSessionRef struct {
	SessionID        string // parent
	SubSessionID     string
	AgentType        string
	ParentToolCallID string
	Status           string
	Result           json.RawMessage
	CreatedAt        time.Time
	UpdatedAt        time.Time
}

// UpdateSubSessionRefParams updates one ref's status and result.
type UpdateSubSessionRefParams struct {
	SessionID    string
	SubSessionID string
	Status       string
	Result       json.RawMessage
}

// SubSessionStore holds sub-session references.
type SubSessionStore interface {
	AddSubSessionRefs(ctx context.Context, refs []SubSessionRef) error
	UpdateSubSessionRef(ctx context.Context, p UpdateSubSessionRefParams) error
	ListSubSessionRefs(ctx context.Context, sessionID string) ([]SubSessionRef, error)
}
