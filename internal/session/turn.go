package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/mcp"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// turnState is one turn's bookkeeping.
type turnState struct {
	s     *store.ManagedSession
	agent *agentSpec
	// tools are the turn's tools: the agent's, and its MCP servers' as
	// listed when the turn began (see turn_mcp.go).
	tools *tools.Config
	// mcp are the turn's connections by server name; mcpDown says why a
	// server of the agent has none.
	mcp     map[string]*mcp.Conn
	mcpDown map[string]string
	usage   model.Usage
	// startSeq: interrupts at or before it were sent before the turn began
	// and do not abort it.
	startSeq   int64
	turnSeq    int64
	runningSeq int64
	// row is the turn's run row as this process last wrote it.
	row *store.RunRow
	// recovered: the turn was taken over from a dead owner (seed 003); its
	// ops are looked up in the journal before anything is re-run.
	recovered bool
	// held is the last model call's span end, appended with the turn's
	// closing events (one write fewer per turn).
	held []store.NewEvent
	// step is the model step the turn is at: the StepCount of the next
	// checkpoint.
	step int64
	// workspace is the workspace snapshot of the last checkpoint; dirty
	// says a tool that may write ran since (see turn_steps.go).
	workspace string
	dirty     bool
	// sandboxHere is the session's sandbox once this turn saw that it
	// runs on this node.
	sandboxHere string
	// movedFrom is the sandbox on another node this turn replaced with
	// one here (the session moved): a call it started there cannot be
	// asked about here.
	movedFrom string
	// started holds the op ids of tool calls whose op_started this turn
	// wrote with their agent.tool_use event (see journalToolUse) and that
	// no one has asked the guest to run yet.
	started map[string]bool
}

// errLostRow: another process took the run row over (its lease expired);
// this turn must stop at once.
var errLostRow = errors.New("the run row was taken over by another process")

// turn runs one turn: insert the run row (the only way status becomes
// running), append session.status_running, loop model calls and tools
// until the model ends its turn, then delete the row and append
// session.status_idle. Every exit path, errors and interrupts included,
// goes through the same end, so each status_running has exactly one
// status_idle — except a shutdown, which leaves the row for recovery.
// rec, when set, is a run row recovery claimed for this process: the turn
// goes on from the store instead of starting.
func (w *worker) turn(ctx context.Context, s *store.ManagedSession, rec *store.RunRow) {
	r := w.r
	tctx, abort := context.WithCancelCause(ctx)
	done := make(chan struct{})
	w.mu.Lock()
	w.abort, w.turnDone = abort, done
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.abort, w.turnDone = nil, nil
		w.mu.Unlock()
		abort(nil)
		close(done)
	}()
	// Checked once the turn is abortable (never with w.mu held: the
	// runtime's lock is taken before a worker's): Destroy marks the
	// session terminating before it aborts the turn, so either this sees
	// the mark or Destroy aborts this turn and waits for it.
	if r.isTerminating(w.id) {
		return
	}

	ts := &turnState{s: s, startSeq: w.conv.seq}
	fctx := context.WithoutCancel(ctx)
	var ok bool
	if rec == nil {
		ok = w.begin(ctx, ts)
	} else {
		ok = w.resume(ctx, ts, rec)
	}
	if !ok {
		w.conv = nil
		return
	}
	// The turn is resumed (or begun): the next recovered one may load, and
	// the sweep may claim more.
	w.endResume()
	w.resumed()

	stopWatch := w.watch(tctx, abort, ts)
	if rec != nil {
		r.awaitWave(tctx)
	}
	w.startWorkspace(ctx, ts)
	var (
		sr   map[string]any
		terr error
	)
	if rec != nil && w.interrupted(tctx) {
		// The user interrupted the turn while no process ran it: it
		// ends here instead of going on.
		terr = errInterrupt
	} else {
		sr, terr = w.loop(tctx, ts)
	}
	stopWatch()

	tail := ts.held
	cause := context.Cause(tctx)
	status := store.RunCompleted
	switch {
	case terr == nil:
	case errors.Is(cause, errInterrupt), errors.Is(terr, errInterrupt):
		sr, status = stopReason(StopEndTurn, nil), store.RunInterrupted
	case errors.Is(cause, errDestroying):
		sr, status = stopReason(StopEndTurn, nil), store.RunInterrupted
	case ctx.Err() != nil, errors.Is(cause, errLostRow), errors.Is(terr, errLostRow):
		// Shutdown (or another process owns the turn now): the run row
		// stays, and recovery goes on with the turn from the store.
		r.log.InfoContext(fctx, "turn left for recovery", "session", w.id, "cause", cause)
		w.conv = nil
		return
	default:
		r.log.WarnContext(fctx, "turn failed", "session", w.id, "err", terr)
		tail = append(tail, errorEvent(errorKind(terr), terr.Error()))
		sr, status = stopReason(StopEndTurn, nil), store.RunFailed
	}
	if terr != nil {
		tail = append(tail, w.notRunResults()...)
		tail = append(tail, w.openEvalEnd(status, terr)...)
	}
	if status == store.RunInterrupted {
		w.interruptThreads(fctx, ts)
	}
	w.end(fctx, ts, sr, status, errText(terr), tail)
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// begin inserts the run row and appends session.status_running.
func (w *worker) begin(ctx context.Context, ts *turnState) bool {
	r := w.r
	ts.turnSeq = w.conv.lastUserSeq
	row := &store.RunRow{SessionID: w.id, TurnSeq: ts.turnSeq, Owner: r.cfg.Owner,
		LeaseExpiresAt: r.cfg.Clock.Now().Add(r.cfg.Lease), LastProgressSeq: w.conv.seq}
	got, err := r.cfg.Store.InsertRunRow(ctx, row)
	if err != nil {
		// A row of a dead owner is recovery's to take over (the sweep
		// finds it); a live owner answers the queue itself.
		r.log.WarnContext(ctx, "turn not started: run row", "session", w.id, "err", err)
		return false
	}
	ts.row = got
	// An interrupt sent while no turn ran is not this turn's: the flag is
	// cleared (the session as the drain read it says whether it is set);
	// one sent from now on aborts the turn (watch) or ends it between
	// steps (loop).
	if ts.s.InterruptPending {
		w.interrupted(ctx)
	}
	r.failpoint(FailAfterRunRow)
	evs, err := r.cfg.Events.Append(ctx, w.id, []store.NewEvent{newEvent(EventStatusRunning, nil)})
	if err != nil {
		r.log.ErrorContext(ctx, "append status_running", "session", w.id, "err", err)
		_ = r.cfg.Store.DeleteRunRow(context.WithoutCancel(ctx), w.id, r.cfg.Owner)
		return false
	}
	w.appended(ctx, evs)
	// The user events up to status_running are this turn's; the run row
	// (TurnSeq) says so while it runs, ProcessedSeq once it ended.
	ts.runningSeq = evs[0].Seq
	if ts.s.ThreadOf != "" {
		r.threadProgress(ts.s.ThreadOf)
	}
	return true
}

// resume goes on with a turn recovery claimed: it appends
// session.status_rescheduled so the trajectory shows the cut (and
// status_running when the turn died before it began), then clears the
// row's Recovering flag: from here the turn runs again.
func (w *worker) resume(ctx context.Context, ts *turnState, rec *store.RunRow) bool {
	r := w.r
	ts.turnSeq, ts.row, ts.recovered = rec.TurnSeq, rec, true
	evs := []store.NewEvent{newEvent(EventStatusRescheduled, nil)}
	if !w.conv.turnOpen() {
		evs = append(evs, newEvent(EventStatusRunning, nil))
	}
	out, err := r.cfg.Events.Append(ctx, w.id, evs)
	if err != nil {
		r.log.ErrorContext(ctx, "append status_rescheduled", "session", w.id, "err", err)
		return false
	}
	w.appended(ctx, out)
	ts.runningSeq = w.conv.runningSeq
	row := *rec
	row.Recovering = false
	row.LeaseExpiresAt = r.cfg.Clock.Now().Add(r.cfg.Lease)
	got, err := r.cfg.Store.UpdateRunRow(ctx, &row, r.cfg.Owner)
	if err != nil {
		r.log.WarnContext(ctx, "recovered turn lost its run row", "session", w.id, "err", err)
		return false
	}
	ts.row = got
	r.log.InfoContext(ctx, "turn recovered", "session", w.id, "turn_seq", rec.TurnSeq, "attempt", rec.RecoveryAttempts)
	return true
}

// interrupted checks and clears the session's interrupt flag (seed 004):
// appending user.interrupt sets it in the same transaction, so it holds
// an interrupt that arrived while the turn was between steps or while no
// process ran it.
func (w *worker) interrupted(ctx context.Context) bool {
	f, err := w.r.cfg.Store.CheckInterruptFlag(ctx, w.id)
	if err != nil {
		w.r.log.WarnContext(ctx, "check interrupt flag", "session", w.id, "err", err)
		return false
	}
	return f.Set
}

// notRunResults gives the tool calls an ended turn did not get to run a
// result, so every agent.tool_use in the trajectory has one.
func (w *worker) notRunResults() []store.NewEvent {
	var out []store.NewEvent
	for _, cl := range w.conv.open {
		if !cl.custom && !(cl.ask && cl.decision == "") {
			out = append(out, resultEvent(cl, textContent("Not run: the turn ended before this tool call ran."), true))
		}
	}
	return out
}

// end closes a turn in ONE store transaction (store.EndTurn): the tail
// events and session.status_idle, the checkpoint after them, the run's
// status, usage and end, and the session's stop reason, cursor and
// totals — so a client that sees status_idle and reads the session sees
// it idle, with its totals. The turn's partial model output goes after.
func (w *worker) end(ctx context.Context, ts *turnState, sr map[string]any, status store.RunStatus, errMsg string, tail []store.NewEvent) {
	r := w.r
	r.turnEndContext(ctx, ts.s)
	srJSON, _ := json.Marshal(sr)
	var sessionUsage json.RawMessage
	if ts.usage != (model.Usage{}) && ts.s != nil {
		// Only a turn writes the session's usage, and one runs at a time:
		// the session as the turn read it holds the usage before it.
		sessionUsage = addUsage(ts.s.Usage, ts.usage)
	}
	turnUsage, _ := json.Marshal(usageJSON(ts.usage))
	tail = append(tail, idleEvent(sr))
	evs, _, err := r.cfg.Store.EndTurn(ctx, store.EndTurn{
		SessionID: w.id, Owner: r.cfg.Owner, Status: status, Error: errMsg, StopReason: srJSON,
		ProcessedSeq: ts.runningSeq, Usage: turnUsage, SessionUsage: sessionUsage, Events: tail,
		Step: ts.step, Workspace: w.snapshot(ctx, ts),
	})
	if err != nil {
		r.log.ErrorContext(ctx, "end turn", "session", w.id, "err", err)
		w.conv = nil
		return
	}
	r.cfg.Events.Publish(w.id, evs)
	w.appended(ctx, evs)
	if ts.s != nil && ts.s.ThreadOf != "" {
		r.threadProgress(ts.s.ThreadOf)
	}
	if err := r.cfg.Store.DeleteStreamChunks(ctx, w.id, ts.turnSeq); err != nil {
		r.log.WarnContext(ctx, "delete stream chunks", "session", w.id, "err", err)
	}
}

// watch aborts the turn on a user.interrupt sent after it began, and
// renews the run row's lease, until the returned stop is called. A lease
// that cannot be renewed because another process owns the row now aborts
// the turn (errLostRow).
func (w *worker) watch(ctx context.Context, abort context.CancelCauseFunc, ts *turnState) (stop func()) {
	r := w.r
	quit := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		rewake := false
		defer func() {
			// Keep a wake-up taken here for the drain after the turn.
			if rewake {
				w.notify()
			}
		}()
		after := ts.startSeq
		renew := time.NewTicker(r.cfg.Lease / 3)
		defer renew.Stop()
		row := *ts.row
		for {
			select {
			case <-quit:
				return
			case <-ctx.Done():
				return
			case <-w.wake:
				// The drain re-reads the queue after the turn, so taking
				// the wake-up here loses nothing.
				evs, err := r.cfg.Store.ListEvents(ctx, store.ListEventsParams{SessionID: w.id, AfterSeq: after, Types: []string{EventUserInterrupt}, Limit: 1})
				if err == nil && len(evs) > 0 {
					abort(errInterrupt)
					return
				}
				rewake = true
			case <-renew.C:
				// Only the lease moves: LastProgressSeq stays where the turn
				// (or its last recovery) started, so recovery can tell
				// whether the attempt made progress.
				row.LeaseExpiresAt = r.cfg.Clock.Now().Add(r.cfg.Lease)
				_, err := r.cfg.Store.UpdateRunRow(ctx, &row, r.cfg.Owner)
				switch {
				case errors.Is(err, store.ErrConflict), errors.Is(err, store.ErrNotFound):
					r.log.WarnContext(ctx, "run row taken over; turn stops", "session", w.id, "err", err)
					abort(errLostRow)
					return
				case err != nil && ctx.Err() == nil:
					r.log.WarnContext(ctx, "run row lease renewal", "session", w.id, "err", err)
				}
			}
		}
	}()
	return func() {
		close(quit)
		<-finished
	}
}

func errorKind(err error) string {
	var ae *model.APIError
	if errors.As(err, &ae) || errors.Is(err, model.ErrNoProvider) || errors.Is(err, model.ErrScriptExhausted) {
		return model.ErrorKind(err)
	}
	return "unknown_error"
}

// loadAgent returns the agent the session runs: the snapshot in the
// session's document (the agent version it was created with, overrides
// applied), else that agent version from the store.
func (w *worker) loadAgent(ctx context.Context, s *store.ManagedSession) (*agentSpec, error) {
	key := fmt.Sprintf("%s@%d", s.AgentID, s.AgentVersion)
	if w.agent != nil && w.agentKey == key {
		return w.agent, nil
	}
	var doc struct {
		Agent json.RawMessage `json:"agent"`
	}
	if json.Unmarshal(s.Doc, &doc) == nil && len(doc.Agent) > 0 && string(doc.Agent) != "null" {
		spec, err := parseAgent(&store.Agent{ID: s.AgentID, Version: s.AgentVersion, Doc: doc.Agent})
		if err == nil {
			w.agent, w.agentKey = spec, key
			return spec, nil
		}
	}
	a, err := w.r.cfg.Store.GetAgent(ctx, s.AgentID, s.AgentVersion)
	if err != nil {
		return nil, fmt.Errorf("agent %s version %d: %w", s.AgentID, s.AgentVersion, err)
	}
	spec, err := parseAgent(a)
	if err != nil {
		return nil, err
	}
	w.agent, w.agentKey = spec, key
	return spec, nil
}
