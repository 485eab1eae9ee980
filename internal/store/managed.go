package store

import (
	"context"
	"encoding/json"
	"time"
)

// This file holds the storage of the Managed Agents API (agents,
// environments, sessions and their events) and the run rows of the turn
// loop. Resource bodies are kept as JSON documents in the SDK's wire shape
// (the API layer owns the shape); the store owns identity, versions,
// timestamps, ordering and the facts session status is derived from.

// Agent is one version of an agent. Updating an agent writes a new version;
// every version stays readable.
type Agent struct {
	ID       string
	TenantID string
	Version  int64
	// Doc is the agent body (name, model, system, tools, …) without id,
	// version and timestamps.
	Doc        json.RawMessage
	ArchivedAt *time.Time
	CreatedAt  time.Time // of the agent (version 1)
	UpdatedAt  time.Time // of this version
}

// Environment is a sandbox configuration sessions run in.
type Environment struct {
	ID         string
	TenantID   string
	Doc        json.RawMessage
	ArchivedAt *time.Time
	CreatedAt  time.Time
	UpdatedAt  time.Time
}

// ManagedSession is a Managed Agents session. Its status is derived
// (seed 000): terminated when TerminatedAt is set; running while a run row
// exists; rescheduling while recovery owns the turn; else idle.
type ManagedSession struct {
	ID            string
	TenantID      string
	AgentID       string
	AgentVersion  int64
	EnvironmentID string
	// Doc holds the rest of the session body (title, metadata, resources, …).
	Doc json.RawMessage
	// SandboxID is the session's sandbox, once its first tool call made one.
	SandboxID string
	// Usage is the JSON of cumulative token usage.
	Usage json.RawMessage
	// ProcessedSeq is the queue cursor: user events with Seq > ProcessedSeq
	// have not been taken by a turn yet.
	ProcessedSeq int64
	// StopReason is the JSON of the last session.status_idle stop reason.
	StopReason   json.RawMessage
	TerminatedAt *time.Time
	ArchivedAt   *time.Time
	// Lineage: fork and rewind (issue 13). WorkspaceSeed is mutable through
	// UpdateManagedSession; the rest is set by ForkManagedSession and
	// RewindManagedSession.
	Lineage SessionLineage
	// ThreadOf is set on a session thread (multi-agent, issue 14): the id
	// of the session whose coordinator opened it. A thread is a session of
	// its own (events, turns, run rows, journal) that is not listed among
	// the tenant's sessions, announces no session webhooks, and goes with
	// its parent when the parent is deleted. Set at create only.
	ThreadOf string
	// ActiveSeconds is the sum of the session's finished and running turns'
	// durations (derived from its runs).
	ActiveSeconds float64
	// InterruptPending: the session's interrupt flag is set (read only;
	// SessionStore's interrupt methods check and clear it).
	InterruptPending bool
	// ClientUpdate marks an UpdateManagedSession that is a client's update
	// (POST /v1/sessions/{id}): the write announces session.updated in its
	// transaction (the runtime's own writes announce nothing). Not stored.
	ClientUpdate bool
	Version      int64
	CreatedAt    time.Time
	UpdatedAt    time.Time
}

// EventUserInterrupt is the event type whose append also sets the
// session's interrupt flag, in the same transaction (seed 004: the flag is
// the durable fact a turn checks between its steps and at recovery).
const EventUserInterrupt = "user.interrupt"

// NewEvent is an event to append. ID is generated ("sevt_…") when empty.
type NewEvent struct {
	ID   string
	Type string
	// Data is the full event JSON as the API returns it (it may omit id and
	// processed_at; the API fills them from the row).
	Data json.RawMessage
	// Op, when set, is an op journal write stored with the event, in the
	// same transaction (see EventOp): an agent.tool_use carries its
	// op_started, an agent.tool_result its op_completed.
	Op *EventOp
}

// SessionEvent is a stored event. Seq is 1-based and dense per session.
type SessionEvent struct {
	SessionID string
	Seq       int64
	ID        string
	Type      string
	Data      json.RawMessage
	CreatedAt time.Time
}

// ListEventsParams pages through a session's events in Seq order.
type ListEventsParams struct {
	SessionID string
	AfterSeq  int64
	// BeforeSeq, when > 0, returns events with Seq < BeforeSeq (newest
	// first is the API's business: the store always returns ascending).
	BeforeSeq int64
	Limit     int
	// Types, when set, keeps only these event types.
	Types []string
}

// ListResourcesParams pages through a tenant's agents, environments or
// sessions by id (ids are time-ordered). AfterID/BeforeID are exclusive.
type ListResourcesParams struct {
	TenantID        string
	AfterID         string
	BeforeID        string
	Limit           int
	IncludeArchived bool
	// AgentID filters sessions by agent (sessions only).
	AgentID string
	// VaultID names the vault whose credentials are listed (credentials only).
	VaultID string
	// Descending lists newest first.
	Descending bool
	// Abandoned branches are never listed with the sessions (they are
	// listed by BranchStore.ListBranches).
}

// RunRow is the fact that a turn is running (seed 000: status is running
// while the run row exists). At most one per session.
type RunRow struct {
	SessionID string
	// RunID is the id of the turn's run record (seed 004).
	RunID string
	// TurnSeq is the Seq of the user event that started the turn.
	TurnSeq int64
	// Owner identifies the live turn: node id and boot id.
	Owner          string
	LeaseExpiresAt time.Time
	// Recovering is set while recovery owns the turn (status rescheduling).
	Recovering bool
	// RecoveryAttempts counts recoveries that made no progress.
	RecoveryAttempts int64
	// LastProgressSeq is the session's last event Seq when the turn last
	// made progress (recovery resets its count when it moved).
	LastProgressSeq int64
	StartedAt       time.Time
	UpdatedAt       time.Time
}

// RunRowClaim is one ClaimRunRows: the rows of SessionIDs that From owns
// go to Owner.
type RunRowClaim struct {
	From          string
	SessionIDs    []string
	Owner         string
	Lease         time.Time
	ProgressTypes []string
}

// ManagedStore holds the Managed Agents resources, sessions included: a
// Managed Agents session is a seed-004 session (BranchStore holds its
// step, turn, fork and rewind operations).
type ManagedStore interface {
	BranchStore

	CreateAgent(ctx context.Context, a *Agent) (*Agent, error)
	// UpdateAgent writes version expectedVersion+1 with doc; a stale
	// expectedVersion → ErrVersionMismatch; archived → ErrConflict.
	UpdateAgent(ctx context.Context, id string, expectedVersion int64, doc json.RawMessage) (*Agent, error)
	// GetAgent returns version (0 = latest).
	GetAgent(ctx context.Context, id string, version int64) (*Agent, error)
	// ListAgents lists the latest version of each agent.
	ListAgents(ctx context.Context, p ListResourcesParams) ([]*Agent, error)
	// ListAgentVersions lists every version, newest first.
	ListAgentVersions(ctx context.Context, id string) ([]*Agent, error)
	ArchiveAgent(ctx context.Context, id string, at time.Time) (*Agent, error)

	CreateEnvironment(ctx context.Context, e *Environment) (*Environment, error)
	GetEnvironment(ctx context.Context, id string) (*Environment, error)
	UpdateEnvironment(ctx context.Context, id string, doc json.RawMessage) (*Environment, error)
	ListEnvironments(ctx context.Context, p ListResourcesParams) ([]*Environment, error)
	ArchiveEnvironment(ctx context.Context, id string, at time.Time) (*Environment, error)
	DeleteEnvironment(ctx context.Context, id string) error

	CreateManagedSession(ctx context.Context, s *ManagedSession) (*ManagedSession, error)
	GetManagedSession(ctx context.Context, id string) (*ManagedSession, error)
	// UpdateManagedSession writes every mutable field (all but ID, TenantID,
	// AgentID, AgentVersion, EnvironmentID, CreatedAt) if Version matches;
	// mismatch → ErrVersionMismatch, nothing written.
	UpdateManagedSession(ctx context.Context, s *ManagedSession) (*ManagedSession, error)
	ListManagedSessions(ctx context.Context, p ListResourcesParams) ([]*ManagedSession, error)
	// DeleteManagedSession removes the session, its events and its run row
	// (and its threads, with theirs).
	DeleteManagedSession(ctx context.Context, id string) error
	// ListSessionThreads lists the threads of a session (ThreadOf =
	// parentID), archived ones too, oldest first (created_at, then id).
	ListSessionThreads(ctx context.Context, parentID string) ([]*ManagedSession, error)

	// AppendEvents appends in order, atomically, with dense Seq, and returns
	// the stored events; a user.interrupt among them sets the session's
	// interrupt flag in the same transaction. Unknown session →
	// ErrNotFound; an abandoned branch → ErrConflict.
	AppendEvents(ctx context.Context, sessionID string, events []NewEvent) ([]SessionEvent, error)
	// AppendEventsBatch appends each session's events as AppendEvents
	// does (in order, dense Seq), all sessions in ONE transaction: all or
	// nothing, so appenders of many sessions share one commit. A session
	// with no events is only checked to exist. Any unknown session →
	// ErrNotFound, and nothing of the batch is stored. The result holds
	// every session of batch.
	AppendEventsBatch(ctx context.Context, batch map[string][]NewEvent) (map[string][]SessionEvent, error)
	ListEvents(ctx context.Context, p ListEventsParams) ([]SessionEvent, error)
	GetEvent(ctx context.Context, sessionID, eventID string) (*SessionEvent, error)
	// LastEventSeq returns the session's newest Seq (0 when none).
	LastEventSeq(ctx context.Context, sessionID string) (int64, error)

	// InsertRunRow creates the session's run row; ErrAlreadyExists when one
	// exists (one turn at a time).
	InsertRunRow(ctx context.Context, r *RunRow) (*RunRow, error)
	GetRunRow(ctx context.Context, sessionID string) (*RunRow, error)
	// UpdateRunRow writes Owner, LeaseExpiresAt, Recovering,
	// RecoveryAttempts and LastProgressSeq if the stored Owner equals
	// expectedOwner; otherwise ErrConflict (another turn owns it).
	UpdateRunRow(ctx context.Context, r *RunRow, expectedOwner string) (*RunRow, error)
	// DeleteRunRow deletes the row if owned by owner (ErrConflict
	// otherwise; ErrNotFound when there is none).
	DeleteRunRow(ctx context.Context, sessionID, owner string) error
	// ListRunRows lists every run row (recovery sweeps them).
	ListRunRows(ctx context.Context) ([]*RunRow, error)
	// ClaimRunRows takes many orphaned run rows over in ONE statement
	// (recovery after a restart claims thousands at once). Each row of
	// c.SessionIDs is written only if its stored Owner is still c.From —
	// the compare-and-set of UpdateRunRow, so of racing claimers exactly
	// one gets each row; rows gone or owned by anyone else are skipped,
	// not an error. A written row gets Owner = c.Owner, Recovering,
	// LeaseExpiresAt = c.Lease, LastProgressSeq = the session's newest
	// event Seq, and RecoveryAttempts + 1 — or 1 when an event of one of
	// c.ProgressTypes has a Seq above its LastProgressSeq (the turn moved
	// since it, or its last recovery, began). It returns the rows written.
	ClaimRunRows(ctx context.Context, c RunRowClaim) ([]*RunRow, error)
	// ListPendingSessions returns, ordered by id, the sessions that are not
	// terminated, have no run row, and hold a user event after
	// ProcessedSeq: input no turn has taken, e.g. because the daemon died
	// between storing a message and starting its turn.
	ListPendingSessions(ctx context.Context) ([]string, error)
}
