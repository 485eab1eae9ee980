package store

import (
	"context"
	"encoding/json"
	"time"
)

// Issue 13: one session model. A Managed Agents session is a seed-004
// session — one row in sessions — and nothing else:
//
//   - its events are its messages: an event's Seq is the message seq, its
//     type the message role, its id a column of the message row;
//   - each turn is a run (runs): the running run is the run row of seed 000
//     (its owner and lease), and a finished run keeps status, timing, usage
//     and the checkpoint the turn ended at;
//   - every step boundary is a checkpoint written in the same transaction as
//     the step's events; a checkpoint names the workspace snapshot taken at
//     that boundary (Checkpoint.Workspace);
//   - fork copies a prefix of the log into a new session; rewind moves the
//     session back and keeps what it cut off as an abandoned branch (a
//     read-only session whose BranchOf names the session).
//
// BranchStore is part of Store: both engines implement it, and the
// contract suite (storetest) covers it. A Managed Agents session's turns
// are RunStore.ListRuns, its step boundaries CheckpointStore.ListCheckpoints.

// NewManagedSession is a session to create with what it starts with.
type NewManagedSession struct {
	Session   ManagedSession
	Resources []*SessionResource
	Events    []NewEvent
}

// StepCommit appends a step's events and the checkpoint that closes the step
// in ONE transaction: either both are stored or neither is.
type StepCommit struct {
	SessionID string
	// Owner must own the session's running run (ErrConflict otherwise,
	// ErrNotFound when none runs); the checkpoint names that run.
	Owner  string
	Events []NewEvent
	// Step is the turn's step the checkpoint closes (Checkpoint.StepCount).
	Step int64
	// Workspace is the workspace snapshot id taken right after the step ("",
	// when the session has no sandbox yet: the empty workspace).
	Workspace string
}

// EndTurn closes the session's running run in ONE transaction: the
// session's stop reason, processed cursor and cumulative usage; the run's
// status, completion time and usage; the tail events (ending with
// session.status_idle); and a checkpoint after the last of them.
type EndTurn struct {
	SessionID string
	// Owner must own the running run (ErrConflict otherwise; ErrNotFound
	// when there is none).
	Owner        string
	Status       RunStatus // completed, failed or interrupted
	Error        string
	StopReason   json.RawMessage
	ProcessedSeq int64 // the session's cursor becomes max(current, this)
	// Usage is this turn's token usage (model.Usage JSON), kept on the run;
	// SessionUsage, when set, is the session's new cumulative usage.
	Usage        json.RawMessage
	SessionUsage json.RawMessage
	Events       []NewEvent
	Step         int64
	Workspace    string
}

// ForkParams creates a new session from a prefix of another's log.
type ForkParams struct {
	FromID string
	NewID  string // generated ("sesn_…") when empty
	// AtSeq: events 1..AtSeq are copied with their ids, created_at and data;
	// the checkpoints at or before AtSeq are copied too.
	AtSeq int64
	// Append is appended after the copied events in the same transaction
	// (e.g. "not run" results and session.status_idle for a turn the fork
	// cuts open), so the fork starts idle and consistent.
	Append []NewEvent
	// ProcessedSeq is the fork's queue cursor: user events after it (and
	// before AtSeq) are answered by the fork's first turn.
	ProcessedSeq int64
	// Workspace is the snapshot the fork's sandbox starts from.
	Workspace string
	Doc       json.RawMessage // nil: the source's document
	// Resources are the fork's session resources (new ids, secrets sealed
	// for them), created in the same transaction.
	Resources []*SessionResource
}

// RewindParams moves a session back to AtSeq.
type RewindParams struct {
	SessionID string
	AtSeq     int64
	// BranchID names the abandoned branch (generated when empty): a new
	// read-only session holding the whole log as it was before the rewind,
	// its checkpoints, and the session's sandbox (SandboxID moves there).
	BranchID string
	Append   []NewEvent
	// ProcessedSeq is the session's queue cursor after the rewind (user
	// events after it are answered by its next turn).
	ProcessedSeq int64
	// Workspace is the snapshot the session's next sandbox starts from;
	// BranchWorkspace the branch's (the workspace as the cut-off timeline
	// left it).
	Workspace       string
	BranchWorkspace string
}

// BranchStore holds the issue-13 operations of Managed Agents sessions.
type BranchStore interface {
	// CreateManagedSessionWith creates the session, its resources and its
	// initial events in ONE transaction (an API create never leaves a
	// session without them).
	CreateManagedSessionWith(ctx context.Context, p NewManagedSession) (*ManagedSession, []SessionEvent, []*SessionResource, error)
	// CommitStep: see StepCommit. Unknown session → ErrNotFound.
	CommitStep(ctx context.Context, p StepCommit) ([]SessionEvent, *Checkpoint, error)
	// EndTurn: see EndTurn.
	EndTurn(ctx context.Context, p EndTurn) ([]SessionEvent, *Checkpoint, error)
	// ForkManagedSession: one transaction; ErrNotFound for an unknown
	// source, ErrInvalid (wrapped with the reason) when AtSeq is outside
	// 1..last seq. The fork starts with the given ProcessedSeq, no usage
	// and no active time, and a checkpoint after its last event naming
	// Workspace.
	ForkManagedSession(ctx context.Context, p ForkParams) (*ManagedSession, error)
	// RewindManagedSession: one transaction; ErrConflict while a run is
	// running (the caller interrupts first). The events after AtSeq, the
	// checkpoints past it and the runs of the turns that began after it
	// (turn_seq >= AtSeq: the turn of a kept user message began after it)
	// move to the branch; the op journal and partial model output of those turns are
	// deleted (their positions will be used again). The session's sandbox
	// moves to the branch (its SandboxID; the caller destroys it): the
	// session's next one starts from Workspace.
	// Returns the session and the branch.
	RewindManagedSession(ctx context.Context, p RewindParams) (session, branch *ManagedSession, err error)
	// ListBranches lists the abandoned branches of a session, oldest first.
	ListBranches(ctx context.Context, sessionID string) ([]*ManagedSession, error)
	// ListWorkspaceSnapshots returns every workspace snapshot id a
	// checkpoint or a session's WorkspaceSeed still names (the workspace
	// GC keeps exactly these).
	ListWorkspaceSnapshots(ctx context.Context) (map[string]bool, error)
}

// SessionLineage is how a session came to be (zero for a plain one).
type SessionLineage struct {
	// ForkedFrom and ForkedAtSeq: the session (and its event seq) this one
	// was forked from.
	ForkedFrom  string
	ForkedAtSeq int64
	// BranchOf: for an abandoned branch, the session it was cut from, and
	// BranchAtSeq the seq that session went back to.
	BranchOf    string
	BranchAtSeq int64
	// WorkspaceSeed is the workspace snapshot the session's next sandbox is
	// created from ("" = empty workspace).
	WorkspaceSeed string
	BranchedAt    *time.Time
	// Rewinds counts the session's rewinds (a runtime that folded the log
	// before one must fold it again).
	Rewinds int64
}
