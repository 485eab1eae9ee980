package session

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Recovery of orphaned turns (seed 003, SPEC §5). A run row no live turn
// owns is an orphan: at start, every row an earlier boot of this node left
// (no waiting for its lease); on each sweep, every row whose lease
// expired and that no turn of this process holds. Recovery claims the row
// (compare-and-set on its owner, so one restart counts once however many
// sweeps see it; many rows per statement, see SweepOrphans), marks it
// Recovering (status rescheduling) and hands the turn to the session's
// worker, which goes on from the store. At most MaxResuming workers load
// and resume their turns at once; a resumed turn runs once the rows
// handed over with it are resumed too (awaitWave), and touches no sandbox
// until it runs a tool.

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
	n := 0
	for _, id := range ids {
		if r.owns(id) {
			r.Wake(id)
			n++
		}
	}
	return n, nil
}

// node is the node part of an owner ("host/boot_…" → "host").
func node(owner string) string {
	if i := strings.LastIndexByte(owner, '/'); i >= 0 {
		return owner[:i]
	}
	return owner
}

// claimBatch is how many orphaned run rows one ClaimRunRows takes over.
const claimBatch = 500

// SweepOrphans claims every orphaned run row for this process, many rows
// per store statement (ClaimRunRows), and hands each claimed one to its
// session's worker; it returns how many it handed over. A row that a turn
// of this process holds, or whose recovery is already pending, is left
// alone.
func (r *Runtime) SweepOrphans(ctx context.Context) (int, error) {
	rows, err := r.cfg.Store.ListRunRows(ctx)
	if err != nil {
		return 0, fmt.Errorf("list run rows: %w", err)
	}
	now := r.cfg.Clock.Now()
	me := r.cfg.Owner
	// The orphans, by the owner they are claimed from (usually one: the
	// earlier boot).
	var froms []string
	byFrom := map[string][]string{}
	for _, row := range rows {
		expired := !row.LeaseExpiresAt.After(now)
		earlierBoot := row.Owner != me && node(row.Owner) == node(me)
		if !earlierBoot && !expired {
			continue
		}
		if !r.claimable(row.SessionID) || !r.owns(row.SessionID) {
			continue
		}
		if byFrom[row.Owner] == nil {
			froms = append(froms, row.Owner)
		}
		byFrom[row.Owner] = append(byFrom[row.Owner], row.SessionID)
	}
	n := 0
	for _, from := range froms {
		for ids := byFrom[from]; len(ids) > 0; {
			r.awaitResumes(ctx, claimBatch)
			k := min(len(ids), claimBatch)
			claimed, err := r.cfg.Store.ClaimRunRows(ctx, store.RunRowClaim{From: from, SessionIDs: ids[:k],
				Owner: me, Lease: r.cfg.Clock.Now().Add(r.cfg.Lease), ProgressTypes: progressTypes})
			if err != nil {
				return n, fmt.Errorf("claim run rows: %w", err)
			}
			ids = ids[k:]
			r.failpoint(FailAfterClaim)
			for _, row := range claimed {
				if r.cfg.Recovered != nil {
					select {
					case r.cfg.Recovered <- row.SessionID:
					default:
					}
				}
				if r.handOver(row) {
					n++
				}
			}
		}
	}
	return n, nil
}

// claimable: no turn of this process holds the session's row and no
// recovery of it is pending. (No turn can begin while the row exists, so
// a row found claimable stays so until the sweep hands it over.)
func (r *Runtime) claimable(sessionID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.ctx == nil || r.terminating[sessionID] {
		return false
	}
	w := r.workers[sessionID]
	return w == nil || !w.holds()
}

// handOver gives a row this process claimed to its session's worker. A
// row it cannot hand over (the runtime stops, the session is being
// destroyed) stays claimed with its lease: the next boot, or a sweep once
// the lease expired, claims it again.
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
	}
	w.setRecovery(row)
	w.notify()
	r.startWorker(w)
	return true
}

// recoverTurn goes on with a turn whose orphaned row the sweep claimed
// for this process: it re-runs the turn or, past the cap, forces the
// session idle.
func (w *worker) recoverTurn(ctx context.Context, s *store.ManagedSession, row *store.RunRow) {
	r := w.r
	r.log.InfoContext(ctx, "recovering turn", "session", w.id, "turn_seq", row.TurnSeq, "attempt", row.RecoveryAttempts)
	if row.RecoveryAttempts > r.cfg.MaxRecoveries {
		w.forceIdle(ctx, s, row)
		return
	}
	w.turn(ctx, s, row)
}

// resumeDone counts one handed-over row less as pending and wakes a sweep
// waiting to claim more.
func (r *Runtime) resumeDone() {
	if r.pendingResumes.Add(-1) == 0 {
		r.waveMu.Lock()
		close(r.wave)
		r.wave = make(chan struct{})
		r.waveMu.Unlock()
	}
	select {
	case r.resumed <- struct{}{}:
	default:
	}
}

// awaitWave holds a resumed turn until every row handed over with it is
// resumed too (at most Lease/2; its lease is renewed meanwhile): after a
// restart with thousands of orphans, every session is back to running
// before the turns spend the machine on model calls and tools, instead of
// the last ones waiting in rescheduling behind the first ones' turns.
func (r *Runtime) awaitWave(ctx context.Context) {
	r.waveMu.Lock()
	ch := r.wave
	r.waveMu.Unlock()
	if r.pendingResumes.Load() <= 0 {
		return
	}
	t := time.NewTimer(r.cfg.Lease / 2)
	defer t.Stop()
	select {
	case <-ch:
	case <-t.C:
	case <-ctx.Done():
	}
}

// awaitResumes paces the sweep: it waits until fewer than limit handed-over
// rows are pending, so rows are claimed about as fast as their turns are
// resumed and no claimed row waits out its lease. It waits at most Lease/2
// (a stuck resume must not stop the sweep).
func (r *Runtime) awaitResumes(ctx context.Context, limit int64) {
	if r.pendingResumes.Load() < limit {
		return
	}
	giveUp := time.NewTimer(r.cfg.Lease / 2)
	defer giveUp.Stop()
	for r.pendingResumes.Load() >= limit {
		select {
		case <-r.resumed:
		case <-giveUp.C:
			return
		case <-ctx.Done():
			return
		}
	}
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
