package store

import (
	"context"
	"encoding/json"
	"time"
)

// This file holds the storage of agent tasks and the sandbox monitor (seed
// 001): tickets (workflows) and their tasks, the events an agent posts from
// inside its sandbox with a per-sandbox activity summary, transcripts,
// terminations, the diagnostic safeguards and workflow results.
//
// Every safeguard's state lives here, never in a node's memory: the anchor
// (OmoiOS) kept its diagnostic cooldown in memory and spawned runaway
// duplicate diagnostics across restarts and workers. Each decision that must
// happen once (a task transition, a termination, a diagnostic spawn) is one
// conditional write, so several nodes and a restarted daemon agree.

// TicketStatus is a ticket's status. The diagnostic sweep looks at every
// ticket that is not done.
type TicketStatus string

const (
	TicketOpen      TicketStatus = "open"
	TicketDone      TicketStatus = "done"
	TicketCancelled TicketStatus = "cancelled"
)

// Valid reports whether s is a known ticket status.
func (s TicketStatus) Valid() bool {
	switch s {
	case TicketOpen, TicketDone, TicketCancelled:
		return true
	}
	return false
}

// Ticket is a workflow: a unit of work made of tasks.
type Ticket struct {
	ID          string // "tkt_…", generated when empty
	TenantID    string
	Title       string
	Description string
	Metadata    map[string]string
	Status      TicketStatus // default TicketOpen
	Version     int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// ListTicketsParams filters a listing in id order; empty fields do not
// filter (an empty TenantID lists every tenant's, for the diagnostic sweep).
type ListTicketsParams struct {
	TenantID string
	// Statuses keeps only these statuses (empty = all).
	Statuses []TicketStatus
	AfterID  string
	Limit    int // <= 0: no limit
}

// TaskKind says what a task runs.
type TaskKind string

const (
	// TaskAgent runs the ticket's agent command.
	TaskAgent TaskKind = "agent"
	// TaskDiagnostic runs the diagnostic agent on a stuck workflow.
	TaskDiagnostic TaskKind = "diagnostic"
)

// Valid reports whether k is a known task kind.
func (k TaskKind) Valid() bool { return k == TaskAgent || k == TaskDiagnostic }

// TaskStatus is a task's status (seed 001).
type TaskStatus string

const (
	TaskPending   TaskStatus = "pending"
	TaskClaiming  TaskStatus = "claiming"
	TaskAssigned  TaskStatus = "assigned"
	TaskRunning   TaskStatus = "running"
	TaskCompleted TaskStatus = "completed"
	TaskFailed    TaskStatus = "failed"
	TaskCancelled TaskStatus = "cancelled"
)

// Valid reports whether s is a known task status.
func (s TaskStatus) Valid() bool {
	switch s {
	case TaskPending, TaskClaiming, TaskAssigned, TaskRunning,
		TaskCompleted, TaskFailed, TaskCancelled:
		return true
	}
	return false
}

// Active reports whether s is one of the seed's active states, the only
// ones termination may move to failed.
func (s TaskStatus) Active() bool {
	switch s {
	case TaskPending, TaskClaiming, TaskAssigned, TaskRunning:
		return true
	}
	return false
}

// Terminal reports whether s is completed, failed or cancelled.
func (s TaskStatus) Terminal() bool {
	return s == TaskCompleted || s == TaskFailed || s == TaskCancelled
}

// ActiveTaskStatuses returns the seed's active states (a fresh slice), as
// the From of a termination's TransitionTask.
func ActiveTaskStatuses() []TaskStatus {
	return []TaskStatus{TaskPending, TaskClaiming, TaskAssigned, TaskRunning}
}

// Task runs a command in its own sandbox as a background process.
type Task struct {
	ID       string // "tsk_…", generated when empty
	TenantID string
	// TicketID is the workflow the task belongs to; "" for a task outside
	// any workflow. When set the ticket must exist (ErrNotFound).
	TicketID string
	Kind     TaskKind // default TaskAgent
	// Command is the agent's argv as a JSON array of strings.
	Command json.RawMessage
	// Env is a JSON object of environment variables (default {}).
	Env json.RawMessage
	// SandboxSpec is the JSON spec of the sandbox to create (default {}).
	SandboxSpec json.RawMessage
	// SandboxID, ProcessID: the task's sandbox and the guest's process id,
	// once assigned and started.
	SandboxID string
	ProcessID string
	// TranscriptPath is where the agent writes its transcript inside the
	// sandbox ("" = its stdout/stderr).
	TranscriptPath string
	Status         TaskStatus // default TaskPending
	// FailureReason is e.g. "idle_timeout", "heartbeat_timeout",
	// "stuck_running", or the agent's exit.
	FailureReason string
	// Result is the task's JSON result (nil when none).
	Result json.RawMessage
	// DiagnosticOf is, for a diagnostic task, the id of the stuck task (or
	// ticket) it diagnoses; "" for agent tasks.
	DiagnosticOf string
	Version      int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
	// StartedAt is set by the store the first time the task enters running.
	StartedAt *time.Time
	// FinishedAt is set by the store when the task enters a terminal state.
	FinishedAt *time.Time
}

// TaskPatch changes fields along with a transition; nil fields are kept.
type TaskPatch struct {
	SandboxID      *string
	ProcessID      *string
	TranscriptPath *string
	FailureReason  *string
	// Result, when non-nil, replaces the result (must be valid JSON).
	Result json.RawMessage
}

// TransitionTaskParams moves task ID to To only if its current status is
// one of From (a compare-and-set). From == To is allowed (a patch without a
// status change, e.g. recording the sandbox while assigned).
type TransitionTaskParams struct {
	ID    string
	From  []TaskStatus
	To    TaskStatus
	Patch TaskPatch
	// At stamps UpdatedAt, and StartedAt/FinishedAt when they get set
	// (zero = the store's clock).
	At time.Time
}

// TaskTransition is the discriminated result of TransitionTask. A mismatch
// is not an error: OK is false, nothing was written, and Task is the stored
// task (so Task.Status is the status that was found). On success Task is the
// new row with Version+1.
type TaskTransition struct {
	OK   bool
	Task *Task
}

// ListTasksParams filters a listing in id (creation) order; empty fields do
// not filter.
type ListTasksParams struct {
	TenantID  string
	TicketID  string
	SandboxID string
	Kind      TaskKind
	// Statuses keeps only these statuses (empty = all).
	Statuses []TaskStatus
	AfterID  string
	Limit    int // <= 0: no limit
}

// HeartbeatStatus is the status an agent.heartbeat carries.
type HeartbeatStatus string

const (
	HeartbeatIdle     HeartbeatStatus = "idle"
	HeartbeatRunning  HeartbeatStatus = "running"
	HeartbeatDegraded HeartbeatStatus = "degraded"
	HeartbeatFailed   HeartbeatStatus = "failed"
)

// Valid reports whether s is a known heartbeat status.
func (s HeartbeatStatus) Valid() bool {
	switch s {
	case HeartbeatIdle, HeartbeatRunning, HeartbeatDegraded, HeartbeatFailed:
		return true
	}
	return false
}

// NewAgentEvent is an event to append (see agentevents.go for the types).
type NewAgentEvent struct {
	// Type must be a known agent event type (IsAgentEventType).
	Type string
	// HeartbeatStatus is required (and valid) for agent.heartbeat and must
	// be empty for every other type.
	HeartbeatStatus HeartbeatStatus
	// Payload is the event's JSON body (nil = none).
	Payload json.RawMessage
	// OccurredAt is the agent's timestamp; zero = ReceivedAt.
	OccurredAt time.Time
}

// AgentEvent is a stored agent event. Seq is 1-based and dense per sandbox.
type AgentEvent struct {
	SandboxID       string
	Seq             int64
	Type            string
	HeartbeatStatus HeartbeatStatus
	Payload         json.RawMessage
	OccurredAt      time.Time
	ReceivedAt      time.Time
}

// AppendAgentEventsParams appends a batch of one sandbox's events.
type AppendAgentEventsParams struct {
	SandboxID string
	Events    []NewAgentEvent
	// ReceivedAt stamps every event of the batch (zero = the store's clock).
	ReceivedAt time.Time
}

// ListAgentEventsParams pages through a sandbox's events in Seq order.
type ListAgentEventsParams struct {
	SandboxID string
	AfterSeq  int64
	Limit     int // <= 0: no limit
}

// AgentActivity is a sandbox's activity summary, the monitor's only input
// about events. It is maintained in the same transaction as every append,
// so it always equals a fold of the sandbox's events in Seq order and the
// monitor never scans events. "Last" means the event with the highest Seq
// of its class; times are the events' OccurredAt.
type AgentActivity struct {
	SandboxID string

	FirstEventAt time.Time
	LastEventAt  time.Time
	// LastReceivedAt is the ReceivedAt of the newest append.
	LastReceivedAt time.Time
	LastSeq        int64

	// StartedAt is the latest agent.started (nil: the agent never said it
	// started — the seed's CREATED).
	StartedAt *time.Time

	FirstHeartbeatAt    *time.Time
	LastHeartbeatAt     *time.Time
	LastHeartbeatStatus HeartbeatStatus

	// LastWorkEventAt/Seq/Type: the latest work event (IsWorkEvent). Note
	// agent.completed is itself a work event, so "work after completion" is
	// LastWorkEventSeq > LatestCompletedSeq (or the seed's time comparison).
	LastWorkEventAt   *time.Time
	LastWorkEventSeq  int64
	LastWorkEventType string

	// LatestCompletedAt/Seq: the latest agent.completed.
	LatestCompletedAt  *time.Time
	LatestCompletedSeq int64

	EventCount     int64
	HeartbeatCount int64
	WorkEventCount int64
	CompletedCount int64

	// TerminatedAt is set by RecordTermination: the monitor skips the
	// sandbox from then on.
	TerminatedAt *time.Time
	UpdatedAt    time.Time
}

// ListActivitiesParams lists activity summaries in sandbox id order.
type ListActivitiesParams struct {
	// IncludeTerminated lists sandboxes with a termination too.
	IncludeTerminated bool
	AfterSandboxID    string
	Limit             int // <= 0: no limit
}

// Transcript is an agent's transcript, saved before its sandbox stops.
// Either Content holds the bytes or BlobKey names a blob holding them.
type Transcript struct {
	ID        string // "trn_…", generated when empty
	TaskID    string // "" when the sandbox ran no task
	SandboxID string
	// Source says where it came from: "file:<path>" or "stdout".
	Source  string
	Content []byte
	BlobKey string
	// Size and SHA256 describe the full transcript (hex sha256).
	Size    int64
	SHA256  string
	SavedAt time.Time // zero = the store's clock
}

// LatestTranscriptParams names a transcript by task or, when TaskID is
// empty, by sandbox.
type LatestTranscriptParams struct {
	TaskID    string
	SandboxID string
}

// TerminationReason says why the monitor stopped a sandbox.
type TerminationReason string

const (
	TerminationIdle           TerminationReason = "idle_timeout"
	TerminationHeartbeat      TerminationReason = "heartbeat_timeout"
	TerminationStuckRunning   TerminationReason = "stuck_running"
	TerminationPostCompletion TerminationReason = "post_completion"
)

// Valid reports whether r is a known termination reason.
func (r TerminationReason) Valid() bool {
	switch r {
	case TerminationIdle, TerminationHeartbeat, TerminationStuckRunning, TerminationPostCompletion:
		return true
	}
	return false
}

// Termination is the monitor's record of stopping a sandbox. At most one
// exists per sandbox: recording it is the claim that makes exactly one node
// run the termination sequence.
type Termination struct {
	SandboxID string
	TaskID    string
	TenantID  string
	Reason    TerminationReason
	// Duration is the idle (or dead, or stuck) duration that triggered it.
	Duration time.Duration
	// TranscriptID references the saved transcript ("" until saved).
	TranscriptID string
	// Node identifies the node that claimed it.
	Node string
	// StopError is the stop's error, if the stop failed ("" = stopped).
	StopError string
	// Completed: the agent had completed, so its task ends completed (a
	// resumed termination reads it here).
	Completed bool
	At        time.Time // claimed at; zero = the store's clock
	// FinishedAt is set by FinishTermination.
	FinishedAt *time.Time
}

// FinishTerminationParams records the outcome of a claimed termination.
type FinishTerminationParams struct {
	SandboxID    string
	TranscriptID string
	StopError    string
	At           time.Time // zero = the store's clock
	// Audit, when set, is appended in the same transaction: a termination
	// is audited exactly once, when it finishes.
	Audit *AuditRecord
}

// DiagnosticState is a ticket's diagnostic safeguards (seed 001
// find_stuck_workflows). It exists for every ticket (zero until the first
// spawn).
type DiagnosticState struct {
	TicketID string
	// Attempts counts diagnostic spawns (max per workflow).
	Attempts int64
	// ConsecutiveFailures counts failed diagnostics since the last success.
	ConsecutiveFailures int64
	// Completed counts diagnostics that completed successfully (the seed's
	// "completed diagnostics + failed originals → human review").
	Completed int64
	// LastSpawnedAt starts the cooldown.
	LastSpawnedAt *time.Time
	// PendingTaskID is the diagnostic task spawned and not yet finished;
	// while set no other diagnostic is spawned.
	PendingTaskID string
	// HumanReview stops diagnostics for the ticket until a human acts.
	HumanReview       bool
	HumanReviewReason string
	HumanReviewAt     *time.Time
	Version           int64
	UpdatedAt         time.Time
}

// DiagnosticRules are the configured safeguards. Zero MaxPerWorkflow or
// MaxConsecutiveFailures is invalid (ErrInvalid): there is always a cap.
type DiagnosticRules struct {
	MaxPerWorkflow         int64
	Cooldown               time.Duration
	MaxConsecutiveFailures int64
}

// ClaimDiagnosticParams claims the right to spawn one diagnostic for a
// ticket and, in the same transaction, creates its task.
type ClaimDiagnosticParams struct {
	TicketID string
	Now      time.Time
	Rules    DiagnosticRules
	// Task is the diagnostic task to create on success (Kind is forced to
	// TaskDiagnostic, TicketID to the ticket's, Status to pending; ID is
	// generated when empty). Required.
	Task *Task
	// CloneFrom is the sandbox whose workspace the diagnostic works on (the
	// workflow's latest task's). When set, the seed's clone_ready safeguard
	// holds only once that sandbox's termination has finished without a
	// stop error: its transcript is saved and it is stopped, so the clone
	// is not of a workspace still being written. "" = nothing to clone.
	CloneFrom string
}

// DiagnosticRefusal says why a claim was refused.
type DiagnosticRefusal string

const (
	RefusedPending             DiagnosticRefusal = "diagnostic_pending"
	RefusedHumanReview         DiagnosticRefusal = "human_review"
	RefusedMaxPerWorkflow      DiagnosticRefusal = "max_per_workflow"
	RefusedConsecutiveFailures DiagnosticRefusal = "consecutive_failures"
	RefusedCloneNotReady       DiagnosticRefusal = "clone_not_ready"
	RefusedCooldown            DiagnosticRefusal = "cooldown"
)

// DiagnosticClaim is the result of ClaimDiagnosticSpawn. A refusal is not an
// error: OK is false, Refusal says why, and nothing was written.
type DiagnosticClaim struct {
	OK      bool
	Refusal DiagnosticRefusal
	// State is the state after the claim (or as found, when refused).
	State DiagnosticState
	// Task is the created diagnostic task (nil when refused).
	Task *Task
	// RetryAt is when the cooldown ends (set when Refusal is cooldown).
	RetryAt *time.Time
}

// DiagnosticOutcomeParams records how a diagnostic task ended.
type DiagnosticOutcomeParams struct {
	TicketID string
	TaskID   string
	Success  bool
	At       time.Time // zero = the store's clock
}

// MarkHumanReviewParams flags a ticket for human review.
type MarkHumanReviewParams struct {
	TicketID string
	Reason   string
	At       time.Time // zero = the store's clock
}

// ValidationStatus is a workflow result's validation status.
type ValidationStatus string

const (
	ValidationPending ValidationStatus = "pending"
	ValidationValid   ValidationStatus = "valid"
	ValidationInvalid ValidationStatus = "invalid"
)

// Valid reports whether s is a known validation status.
func (s ValidationStatus) Valid() bool {
	return s == ValidationPending || s == ValidationValid || s == ValidationInvalid
}

// WorkflowResult is a ticket's submitted result (optional: a workflow whose
// tasks all completed and none failed needs none). One per ticket; a new
// submission replaces it.
type WorkflowResult struct {
	TicketID string
	// TaskID is the task that submitted it ("" when submitted by the API).
	TaskID           string
	Result           json.RawMessage
	ValidationStatus ValidationStatus // default pending
	ValidationNote   string
	Version          int64
	SubmittedAt      time.Time // zero = the store's clock
	UpdatedAt        time.Time
}

// MonitorStore holds tickets, tasks, agent events and activity,
// transcripts, terminations, diagnostic safeguards and workflow results.
type MonitorStore interface {
	// CreateTicket inserts a ticket (Version 1); ErrAlreadyExists on a
	// duplicate id.
	CreateTicket(ctx context.Context, t *Ticket) (*Ticket, error)
	GetTicket(ctx context.Context, id string) (*Ticket, error)
	ListTickets(ctx context.Context, p ListTicketsParams) ([]*Ticket, error)
	// UpdateTicket writes Title, Description, Metadata and Status if the
	// stored Version equals t.Version and returns the row with Version+1;
	// otherwise ErrVersionMismatch and nothing is written.
	UpdateTicket(ctx context.Context, t *Ticket) (*Ticket, error)

	// CreateTask inserts a task (Version 1, default status pending);
	// ErrAlreadyExists on a duplicate id, ErrNotFound for an unknown ticket.
	CreateTask(ctx context.Context, t *Task) (*Task, error)
	GetTask(ctx context.Context, id string) (*Task, error)
	ListTasks(ctx context.Context, p ListTasksParams) ([]*Task, error)
	// TransitionTask is the tasks' only status write: a compare-and-set on
	// the current status, so a completed task is never moved to failed by a
	// stale writer. Unknown task → ErrNotFound.
	TransitionTask(ctx context.Context, p TransitionTaskParams) (TaskTransition, error)

	// AppendAgentEvents appends in order, atomically, with dense Seq, and
	// updates the sandbox's AgentActivity in the same transaction. An
	// unknown type or bad heartbeat status → ErrInvalid, nothing written.
	// The sandbox row is not required (the API checks it).
	AppendAgentEvents(ctx context.Context, p AppendAgentEventsParams) ([]AgentEvent, error)
	ListAgentEvents(ctx context.Context, p ListAgentEventsParams) ([]AgentEvent, error)
	// GetActivity returns the sandbox's summary; ErrNotFound before its
	// first event.
	GetActivity(ctx context.Context, sandboxID string) (*AgentActivity, error)
	// ListActivities lists the monitored sandboxes (those with events).
	ListActivities(ctx context.Context, p ListActivitiesParams) ([]*AgentActivity, error)

	// SaveTranscript stores a transcript (a new row per save).
	SaveTranscript(ctx context.Context, t *Transcript) (*Transcript, error)
	GetTranscript(ctx context.Context, id string) (*Transcript, error)
	// LatestTranscript returns the newest transcript of the task (or of the
	// sandbox when TaskID is empty); ErrNotFound when none.
	LatestTranscript(ctx context.Context, p LatestTranscriptParams) (*Transcript, error)

	// RecordTermination claims the termination of a sandbox and sets its
	// activity's TerminatedAt, in one transaction. A second termination of
	// the same sandbox returns the stored one with ErrAlreadyExists, so two
	// nodes never terminate twice.
	RecordTermination(ctx context.Context, t *Termination) (*Termination, error)
	// FinishTermination records the transcript reference and stop outcome
	// and appends p.Audit, once: a finished termination is ErrConflict
	// (nothing written), ErrNotFound when the sandbox has none.
	FinishTermination(ctx context.Context, p FinishTerminationParams) (*Termination, error)
	// ListUnfinishedTerminations lists the terminations claimed at or
	// before claimedBefore that never finished (their node died in the
	// sequence), oldest first.
	ListUnfinishedTerminations(ctx context.Context, claimedBefore time.Time) ([]*Termination, error)
	GetTermination(ctx context.Context, sandboxID string) (*Termination, error)

	// GetDiagnosticState returns the ticket's safeguards (zero-valued before
	// the first spawn); ErrNotFound for an unknown ticket.
	GetDiagnosticState(ctx context.Context, ticketID string) (*DiagnosticState, error)
	// ClaimDiagnosticSpawn atomically checks every safeguard (no pending
	// diagnostic, no human review, Attempts < MaxPerWorkflow,
	// ConsecutiveFailures < MaxConsecutiveFailures, cooldown passed since
	// LastSpawnedAt) and, when they hold, increments Attempts, sets
	// LastSpawnedAt = Now and PendingTaskID, and creates the task — one
	// transaction, so of N racing callers on any number of nodes exactly one
	// succeeds. Unknown ticket → ErrNotFound.
	ClaimDiagnosticSpawn(ctx context.Context, p ClaimDiagnosticParams) (DiagnosticClaim, error)
	// RecordDiagnosticOutcome clears PendingTaskID and counts the outcome
	// (success: Completed+1 and ConsecutiveFailures = 0; failure:
	// ConsecutiveFailures+1). TaskID must be the pending one, else
	// ErrConflict and nothing is written (an outcome counts once).
	RecordDiagnosticOutcome(ctx context.Context, p DiagnosticOutcomeParams) (*DiagnosticState, error)
	// MarkHumanReview sets the human-review flag (idempotent: the first
	// reason and time are kept).
	MarkHumanReview(ctx context.Context, p MarkHumanReviewParams) (*DiagnosticState, error)

	// SubmitWorkflowResult creates or replaces the ticket's result (Version
	// counts submissions); ErrNotFound for an unknown ticket.
	SubmitWorkflowResult(ctx context.Context, r *WorkflowResult) (*WorkflowResult, error)
	// GetWorkflowResult returns it; ErrNotFound when none was submitted.
	GetWorkflowResult(ctx context.Context, ticketID string) (*WorkflowResult, error)
}
