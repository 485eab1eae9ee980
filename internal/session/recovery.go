package session

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Recovery of orphaned turns (seed 003, SPEC §5). A run row no live turn
// owns is an orphan: at start, every row an earlier boot of this node left
// (no waiting for its lease); on each sweep, every row whose lease
// expired and that no turn of this process holds. Recovery claims the row
// (compare-and-set on its owner, so one restart counts once however many
// sweeps see it), marks it Recovering (status rescheduling) and hands the
// turn to the session's worker, which goes on from the store.

// DefaultMaxRecoveries is how many recoveries without progress one turn
// gets; the next one forces the session idle (stop reason
// retries_exhausted).
const DefaultMaxRecoveries = 5

// StopRetriesExhausted is the stop reason of a turn recovery gave up on.
const StopRetriesExhausted = "retries_exhausted"

// progressTypes are the events that show a turn moved: anything the model
// or a tool produced. Status events and errors (recovery's own) are not.
var progressTypes = []string{EventAgentMessage, EventAgentThinking, EventAgentToolUse, EventAgentToolResult,
	EventAgentCustomToolUse, EventAgentMCPToolUse, EventAgentMCPToolResult, EventSpanModelStart, EventSpanModelEnd,
	EventOutcomeEvalStart, EventOutcomeEvalEnd}

// sweepLoop recovers orphans at start and then every RecoverEvery.
func (r *Runtime) sweepLoop(ctx context.Context) {
	defer r.wg.Done()
	for {
		if n, err := r.SweepOrphans(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "orphan sweep", "err", err)
		} else if n > 0 {
			r.log.InfoContext(ctx, "orphaned turns handed to recovery", "count", n)
		}
		if n, err := r.WakePending(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "pending-input sweep", "err", err)
		} else if n > 0 {
			r.log.InfoContext(ctx, "sessions with untaken input woken", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-r.cfg.Clock.After(r.cfg.RecoverEvery):
		}
	}
}

// WakePending wakes every session holding user input that no turn has
// taken: a crash between storing a message and inserting its run row leaves
// no run row for the orphan sweep to find, and without this the message
// would wait for the session's next event (agents #1729, #2105).
func (r *Runtime) WakePending(ctx context.Context) (int, error) {
	ids, err := r.cfg.Store.ListPendingSessions(ctx)
	if err != nil {
		return 0, fmt.Errorf("list pending sessions: %w", err)
	}
	for _, id := range ids {
		r.Wake(id)
	}
	return len(ids), nil
}

// node is the node part of an owner ("host/boot_…" → "host").
func node(owner string) string {
	if i := strings.LastIndexByte(owner, '/'); i >= 0 {
		return owner[:i]
	}
	return owner
}

// SweepOrphans hands every orphaned run row to recovery and returns how
// many it handed over.
func (r *Runtime) SweepOrphans(ctx context.Context) (int, error) {
	rows, err := r.cfg.Store.ListRunRows(ctx)
	if err != nil {
		return 0, fmt.Errorf("list run rows: %w", err)
	}
	now := r.cfg.Clock.Now()
	me := r.cfg.Owner
	n := 0
	for _, row := range rows {
		expired := !row.LeaseExpiresAt.After(now)
		earlierBoot := row.Owner != me && node(row.Owner) == node(me)
		if !earlierBoot && !expired {
			continue
		}
		if r.handOver(row) {
			n++
		}
	}
	return n, nil
}

// handOver gives an orphaned row to its session's worker, unless a turn
// of this process holds it or a recovery of it is already pending.
func (r *Runtime) handOver(row *store.RunRow) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.ctx == nil || r.terminating[row.SessionID] {
		return false
	}
	w := r.workers[row.SessionID]
	if w == nil {
		w = newWorker(r, row.SessionID)
		r.workers[row.SessionID] = w
		r.wg.Add(1)
		go w.run(r.ctx)
	} else if w.holds() {
		return false
	}
	w.setRecovery(row)
	w.notify()
	return true
}

// claim takes the orphaned row over for this process: the attempt count
// goes up by one, or restarts at one when the turn made progress since it
// (or its last recovery) began. It returns nil when another process
// claimed it first or the row is gone.
func (w *worker) claim(ctx context.Context, old *store.RunRow) (*store.RunRow, error) {
	r := w.r
	progress, err := r.cfg.Store.ListEvents(ctx, store.ListEventsParams{SessionID: w.id, AfterSeq: old.LastProgressSeq, Types: progressTypes, Limit: 1})
	if err != nil {
		return nil, err
	}
	last, err := r.cfg.Store.LastEventSeq(ctx, w.id)
	if err != nil {
		return nil, err
	}
	row := *old
	if len(progress) > 0 {
		row.RecoveryAttempts = 0
	}
	row.RecoveryAttempts++
	row.Owner, row.Recovering, row.LastProgressSeq = r.cfg.Owner, true, last
	row.LeaseExpiresAt = r.cfg.Clock.Now().Add(r.cfg.Lease)
	got, err := r.cfg.Store.UpdateRunRow(ctx, &row, old.Owner)
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if r.cfg.Recovered != nil {
		select {
		case r.cfg.Recovered <- w.id:
		default:
		}
	}
	return got, nil
}

// recoverTurn claims an orphaned row and either re-runs its turn or, past
// the cap, forces the session idle. It reports whether the drain should
// go on.
func (w *worker) recoverTurn(ctx context.Context, s *store.ManagedSession, old *store.RunRow) bool {
	r := w.r
	row, err := w.claim(ctx, old)
	if err != nil {
		r.log.WarnContext(ctx, "claim orphaned run row", "session", w.id, "err", err)
		return false
	}
	if row == nil {
		return true
	}
	r.log.InfoContext(ctx, "recovering turn", "session", w.id, "turn_seq", row.TurnSeq, "attempt", row.RecoveryAttempts, "old_owner", old.Owner)
	if row.RecoveryAttempts > r.cfg.MaxRecoveries {
		w.forceIdle(ctx, s, row)
		return true
	}
	w.turn(ctx, s, row)
	return true
}

// forceIdle ends a turn recovery gave up on: session.error, a result for
// every tool call left open, the row deleted and session.status_idle with
// stop reason retries_exhausted. The user's message is reported, never
// silently dropped.
func (w *worker) forceIdle(ctx context.Context, s *store.ManagedSession, row *store.RunRow) {
	r := w.r
	r.log.WarnContext(ctx, "turn recovery gave up", "session", w.id, "turn_seq", row.TurnSeq, "attempts", row.RecoveryAttempts-1)
	tail := []store.NewEvent{}
	if w.conv.spanOpen != "" {
		tail = append(tail, newEvent(EventSpanModelEnd, map[string]any{
			"model_request_start_id": w.conv.spanOpen, "is_error": true, "model_usage": usageJSON(model.Usage{}),
		}))
	}
	tail = append(tail, exhaustedEvent(fmt.Sprintf(
		"the turn was recovered %d times without making progress and was stopped; send the message again to retry", row.RecoveryAttempts-1)))
	tail = append(tail, w.notRunResults()...)
	tail = append(tail, w.openEvalEnd(store.RunFailed, errors.New("recovery gave up"))...)
	ts := &turnState{s: s, turnSeq: row.TurnSeq, runningSeq: max(w.conv.runningSeq, row.TurnSeq), recovered: true}
	w.startWorkspace(ctx, ts)
	w.end(context.WithoutCancel(ctx), ts, map[string]any{"type": StopRetriesExhausted}, store.RunFailed,
		"recovery gave up: the turn made no progress", tail)
}

// exhaustedEvent is the session.error of a turn recovery gave up on.
func exhaustedEvent(message string) store.NewEvent {
	return newEvent(EventSessionError, map[string]any{"error": map[string]any{
		"type": "unknown_error", "message": message, "retry_status": map[string]any{"type": "exhausted"},
	}})
}
