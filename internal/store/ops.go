package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// This file holds the crash-proof-turn records of seed 003: the op journal
// of side effects, the partial model output of the current step (so a
// resumed turn continues from it instead of re-issuing the request), and
// background tasks that outlive a restart.

// OpStatus is an op's journal status.
type OpStatus string

const (
	// OpStarted is written BEFORE the side effect is attempted.
	OpStarted OpStatus = "started"
	// OpCompleted is written with the result AFTER the side effect.
	OpCompleted OpStatus = "completed"
)

// Op is one journalled side effect. ID = hash(kind ‖ canonical args ‖
// position), so the same call replayed by recovery has the same ID and two
// identical calls in one turn have different ones.
type Op struct {
	ID        string
	SessionID string
	Kind      string // e.g. "model_request", "tool_exec", "outbound_call"
	// Position: the turn's sequence number, the step, the call's index in
	// the step.
	TurnSeq int64
	Step    int64
	Index   int64
	Args    json.RawMessage
	Status  OpStatus
	// Result is the recorded result (or a reference to it, e.g. a blob key).
	Result      json.RawMessage
	StartedAt   time.Time
	CompletedAt *time.Time
}

// EventOp is an op journal write that travels with an event (NewEvent.Op)
// and commits in the same transaction as it, whichever write stores the
// event (AppendEvents, AppendEventsBatch, CommitStep, EndTurn, …): the
// event and the op row are stored together or neither is. It saves the
// journal a transaction of its own per op_started and per op_completed.
// Exactly one of Start and Complete is set (ErrInvalid otherwise).
type EventOp struct {
	// Start records the op as started, as StartOp does. Its SessionID must
	// be the event's session (empty means that one). An op whose id is
	// already in the journal fails the whole write with ErrAlreadyExists:
	// the caller learns it did not start the op (and reads it with GetOp).
	Start *Op
	// Complete records the result of a started op, as CompleteOp does. An
	// op already completed keeps its first result and the write succeeds;
	// an op not in the journal fails the whole write with ErrNotFound.
	Complete *OpCompletion
}

// OpCompletion is the op_completed record of an EventOp.
type OpCompletion struct {
	ID     string
	Result json.RawMessage
}

// CheckEventOp validates an event's op write (nil: none) for the event's
// session; engines call it from their event validation. It never changes
// o: a Start op with an empty SessionID is written for sessionID.
func CheckEventOp(sessionID string, o *EventOp) error {
	switch {
	case o == nil:
		return nil
	case (o.Start == nil) == (o.Complete == nil):
		return fmt.Errorf("session %s: an event's op write sets exactly one of Start and Complete: %w", sessionID, ErrInvalid)
	case o.Start != nil && o.Start.SessionID != "" && o.Start.SessionID != sessionID:
		return fmt.Errorf("session %s: an event's op %s belongs to session %s: %w", sessionID, o.Start.ID, o.Start.SessionID, ErrInvalid)
	case o.Complete != nil && o.Complete.ID == "":
		return fmt.Errorf("session %s: an event's op completion names no op: %w", sessionID, ErrInvalid)
	}
	return nil
}

// StreamChunk is partial model output of one step, appended as it streams.
type StreamChunk struct {
	SessionID string
	TurnSeq   int64
	Step      int64
	Seq       int64 // dense per (session, turn, step), from 1
	Data      json.RawMessage
	CreatedAt time.Time
}

// PartialBlock is the content block a step's model response was streaming
// when last saved: one row per step, overwritten as the block grows (a
// small write per batch of tokens, not a row per token), so a step resumed
// after a crash continues the block instead of repeating it.
type PartialBlock struct {
	SessionID string
	TurnSeq   int64
	Step      int64
	// Index is the block's position among the step's blocks: the number of
	// stream chunks (completed blocks) before it. A row whose block has
	// since completed has Index below the chunk count.
	Index     int64
	Data      json.RawMessage
	UpdatedAt time.Time
}

// BackgroundTask is a `run_in_background` command that survives restarts.
type BackgroundTask struct {
	ID        string
	SessionID string
	SandboxID string
	// ProcessID is the guest's id of the background process.
	ProcessID string
	Command   string
	Status    string // "running", "exited", "killed", "expired"
	ExitCode  *int64
	StartedAt time.Time
	// Deadline is StartedAt + the 30-minute cap.
	Deadline  time.Time
	UpdatedAt time.Time
}

// OpStore holds the op journal, stream chunks and background tasks.
type OpStore interface {
	// StartOp records an op as started. If the op already exists (a replay)
	// it is returned unchanged with ErrAlreadyExists, so the caller sees
	// whether it completed.
	StartOp(ctx context.Context, op *Op) (*Op, error)
	// CompleteOp records the result; completing twice keeps the first
	// result and returns ErrConflict.
	CompleteOp(ctx context.Context, sessionID, opID string, result json.RawMessage) (*Op, error)
	GetOp(ctx context.Context, sessionID, opID string) (*Op, error)
	// ListOps lists a session's ops (of one turn when turnSeq > 0), in
	// position order.
	ListOps(ctx context.Context, sessionID string, turnSeq int64) ([]*Op, error)

	// AppendStreamChunk appends a chunk with the next Seq for its step.
	AppendStreamChunk(ctx context.Context, c *StreamChunk) (*StreamChunk, error)
	// ListStreamChunks lists one step's chunks in Seq order.
	ListStreamChunks(ctx context.Context, sessionID string, turnSeq, step int64) ([]*StreamChunk, error)
	// DeleteStreamChunks drops a session's chunks and partial blocks of
	// turns up to turnSeq (once the step's output is persisted as events).
	DeleteStreamChunks(ctx context.Context, sessionID string, upToTurnSeq int64) error
	// SavePartialBlock writes the step's block in progress over the one
	// saved before. Zero UpdatedAt becomes now.
	SavePartialBlock(ctx context.Context, b *PartialBlock) error
	// GetPartialBlock reads the step's block in progress (ErrNotFound when
	// none was saved).
	GetPartialBlock(ctx context.Context, sessionID string, turnSeq, step int64) (*PartialBlock, error)

	CreateBackgroundTask(ctx context.Context, t *BackgroundTask) (*BackgroundTask, error)
	UpdateBackgroundTask(ctx context.Context, t *BackgroundTask) (*BackgroundTask, error)
	GetBackgroundTask(ctx context.Context, id string) (*BackgroundTask, error)
	// ListBackgroundTasks lists tasks with the given status ("" = all), of
	// one session when sessionID is set.
	ListBackgroundTasks(ctx context.Context, sessionID, status string) ([]*BackgroundTask, error)
}
