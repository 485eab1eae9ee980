package store

import (
	"context"
	"encoding/json"
	"time"
)

// Sandbox is the durable record of a sandbox. Its lifecycle state (cold,
// warming, active, stopping, destroyed) is never stored: it is derived from
// the facts below by the sandbox layer (seed 000: status is derived, never
// written ahead of the facts).
type Sandbox struct {
	ID       string
	TenantID string
	Driver   string
	Image    string
	Network  string
	// Limits is the JSON of the requested limits (memory_mb, pids, cpus).
	Limits     json.RawMessage
	SleepAfter time.Duration
	Metadata   map[string]string

	// Environment and SessionKey, with TenantID, key the sandbox's backups
	// (seed 000: the latest backup for (tenant, environment, session)).
	Environment string
	SessionKey  string
	// Node is the id of the node whose driver runs the sandbox ("" on a
	// daemon alone): only that node recovers, reaps or starts it.
	Node string

	// Handle is the driver's handle (JSON) while the sandbox runs; nil when
	// it is not started.
	Handle json.RawMessage
	// StartedAt is when the driver started the running instance.
	StartedAt *time.Time
	// WarmedAt is set when warm-up finished for the running instance.
	WarmedAt *time.Time
	// StoppingAt is set when a stop (snapshot, then stop) began.
	StoppingAt *time.Time
	// DestroyedAt makes the sandbox terminal.
	DestroyedAt *time.Time
	// Generation is the workspace generation: it increments every time the
	// workspace is (re)established by a warm-up, and is stamped inside the
	// workspace so a surviving workspace is recognised.
	Generation int64
	// LastActivityAt is renewed by every call (sleep_after counts from it).
	LastActivityAt time.Time

	Version   int64
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Sandbox states. The sandbox layer names them (sandbox.State); they are
// written down here because the store keeps a history of them.
const (
	SandboxCold      = "cold"
	SandboxWarming   = "warming"
	SandboxActive    = "active"
	SandboxStopping  = "stopping"
	SandboxDestroyed = "destroyed"
)

// State derives the lifecycle state from the durable facts of the record
// (seed 000: cold → warming → active → stopping → cold; destroyed is
// terminal). It is the only place the state machine is written down: the
// code that changes state does so by writing a fact (Handle, WarmedAt,
// StoppingAt, DestroyedAt).
func (sb *Sandbox) State() string {
	switch {
	case sb.DestroyedAt != nil:
		return SandboxDestroyed
	case sb.StoppingAt != nil:
		return SandboxStopping
	case len(sb.Handle) == 0:
		return SandboxCold
	case sb.WarmedAt == nil:
		return SandboxWarming
	default:
		return SandboxActive
	}
}

// SandboxTransition is one entry of a sandbox's state history: the state
// its facts entered, and when. The history is written by the store in the
// same statement as the facts (CreateSandbox, UpdateSandbox), so it can
// never say more or less than the facts did; it starts at the sandbox's
// creation (or, for sandboxes older than the history, at their first
// change since) and keeps the newest MaxSandboxTransitions entries.
type SandboxTransition struct {
	// Seq numbers a sandbox's transitions from 1, in order.
	Seq   int64
	State string
	// At is the time of the fact that made the state: StartedAt for
	// warming, WarmedAt for active, StoppingAt for stopping, DestroyedAt
	// for destroyed, the write's time for cold (a stop's end clears the
	// facts rather than writing one).
	At time.Time
	// Generation is the workspace generation at the transition.
	Generation int64
}

// MaxSandboxTransitions bounds the history kept per sandbox: a sandbox
// that hibernates and wakes for years keeps its newest transitions.
const MaxSandboxTransitions = 200

// TransitionAt is the time a transition into sb's state happened: the
// time of the fact that made it, or now when the state (cold) has none.
func (sb *Sandbox) TransitionAt(now time.Time) time.Time {
	var at *time.Time
	switch sb.State() {
	case SandboxDestroyed:
		at = sb.DestroyedAt
	case SandboxStopping:
		at = sb.StoppingAt
	case SandboxWarming:
		at = sb.StartedAt
	case SandboxActive:
		at = sb.WarmedAt
	}
	if at == nil {
		return now
	}
	return *at
}

// ListSandboxesParams filters a listing; empty fields do not filter.
type ListSandboxesParams struct {
	TenantID string
	// IncludeDestroyed lists destroyed sandboxes too.
	IncludeDestroyed bool
	// Running lists only sandboxes whose instance may run: those with a
	// driver Handle or a stop in progress (StoppingAt) — what recovery and
	// the idle reaper look at, without reading every cold sandbox (each
	// hibernated object keeps one).
	Running bool
	// Node lists only the sandboxes of that node ("" = every node's).
	Node    string
	AfterID string
	Limit   int
}

// Backup is a verified workspace snapshot stored as a blob.
type Backup struct {
	ID          string
	TenantID    string
	Environment string
	SessionKey  string
	SandboxID   string
	BlobKey     string
	Size        int64
	SHA256      string
	// Stats is the snapshot's JSON stats (files, dirs, bytes, …).
	Stats      json.RawMessage
	Generation int64
	CreatedAt  time.Time
	ExpiresAt  time.Time
}

// BackupKey names the owner of a line of backups.
type BackupKey struct {
	TenantID    string
	Environment string
	SessionKey  string
}

// SandboxStore holds sandboxes and their backups.
type SandboxStore interface {
	// CreateSandbox inserts a new sandbox (Version 1); ErrAlreadyExists on a
	// duplicate id.
	CreateSandbox(ctx context.Context, sb *Sandbox) (*Sandbox, error)
	GetSandbox(ctx context.Context, id string) (*Sandbox, error)
	ListSandboxes(ctx context.Context, p ListSandboxesParams) ([]*Sandbox, error)
	// UpdateSandbox writes every mutable field of sb (all but ID, TenantID
	// and CreatedAt) if the stored Version equals sb.Version, and returns the
	// stored row with Version+1. On mismatch it returns an error wrapping
	// ErrVersionMismatch and writes nothing.
	UpdateSandbox(ctx context.Context, sb *Sandbox) (*Sandbox, error)
	// TouchSandbox renews LastActivityAt without a version check and
	// without bumping Version (activity is a side channel, like the
	// interrupt flag: it must never make a state transition fail).
	TouchSandbox(ctx context.Context, id string, at time.Time) error
	// DeleteSandbox removes the sandbox and its transition history.
	DeleteSandbox(ctx context.Context, id string) error
	// ListSandboxTransitions returns the sandbox's state history, oldest
	// first (at most MaxSandboxTransitions entries); ErrNotFound when the
	// sandbox does not exist.
	ListSandboxTransitions(ctx context.Context, id string) ([]SandboxTransition, error)

	CreateBackup(ctx context.Context, b *Backup) (*Backup, error)
	// LatestBackup returns the newest unexpired backup for the key at now
	// (ErrNotFound when none).
	LatestBackup(ctx context.Context, key BackupKey, now time.Time) (*Backup, error)
	GetBackup(ctx context.Context, id string) (*Backup, error)
	// ListBackups lists a sandbox's backups, newest first.
	ListBackups(ctx context.Context, sandboxID string) ([]*Backup, error)
	// DeleteExpiredBackups removes backups with ExpiresAt <= now and returns
	// them, so the caller can delete their blobs.
	DeleteExpiredBackups(ctx context.Context, now time.Time) ([]*Backup, error)
}
