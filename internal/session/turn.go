package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// turnState is one turn's bookkeeping.
type turnState struct {
	s     *store.ManagedSession
	agent *agentSpec
	usage model.Usage
	// startSeq: interrupts at or before it were sent before the turn began
	// and do not abort it.
	startSeq   int64
	turnSeq    int64
	runningSeq int64
	// held is the last model call's span end, appended with the turn's
	// closing events (one write fewer per turn).
	held []store.NewEvent
}

// turn runs one turn: insert the run row (the only way status becomes
// running), append session.status_running, loop model calls and tools
// until the model ends its turn, then delete the row and append
// session.status_idle. Every exit path, errors and interrupts included,
// goes through the same end, so each status_running has exactly one
// status_idle.
func (w *worker) turn(ctx context.Context, s *store.ManagedSession) {
	r := w.r
	w.mu.Lock()
	if r.isTerminating(w.id) {
		w.mu.Unlock()
		return
	}
	tctx, abort := context.WithCancelCause(ctx)
	done := make(chan struct{})
	w.abort, w.turnDone = abort, done
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.abort, w.turnDone = nil, nil
		w.mu.Unlock()
		abort(nil)
		close(done)
	}()

	ts := &turnState{s: s, startSeq: w.conv.seq, turnSeq: w.conv.lastUserSeq}
	now := r.cfg.Clock.Now()
	row := &store.RunRow{SessionID: w.id, TurnSeq: w.conv.lastUserSeq, Owner: r.cfg.Owner,
		LeaseExpiresAt: now.Add(r.cfg.Lease), LastProgressSeq: w.conv.seq}
	if _, err := r.cfg.Store.InsertRunRow(ctx, row); err != nil {
		if !errors.Is(err, store.ErrAlreadyExists) || !w.takeOverStaleRow(ctx, row) {
			r.log.WarnContext(ctx, "turn not started: run row", "session", w.id, "err", err)
			// Leave the queue as it is: the owner of the row (or recovery)
			// answers it. Returning without a wake-up ends this drain.
			w.conv = nil
			return
		}
	}
	fctx := context.WithoutCancel(ctx)
	evs, err := r.cfg.Events.Append(ctx, w.id, []store.NewEvent{newEvent(EventStatusRunning, nil)})
	if err != nil {
		r.log.ErrorContext(ctx, "append status_running", "session", w.id, "err", err)
		_ = r.cfg.Store.DeleteRunRow(fctx, w.id, r.cfg.Owner)
		w.conv = nil
		return
	}
	w.appended(ctx, evs)
	// The user events up to status_running are this turn's; the run row
	// (TurnSeq) says so while it runs, ProcessedSeq once it ended.
	ts.runningSeq = evs[0].Seq

	stopWatch := w.watch(tctx, abort, ts)
	sr, terr := w.loop(tctx, ts)
	stopWatch()

	tail := ts.held
	cause := context.Cause(tctx)
	switch {
	case terr == nil:
	case errors.Is(cause, errInterrupt):
		sr = stopReason(StopEndTurn, nil)
	case errors.Is(cause, errDestroying):
		sr = stopReason(StopEndTurn, nil)
	case ctx.Err() != nil:
		tail = append(tail, errorEvent("unknown_error", "agentkernel shut down during the turn; send the message again"))
		sr = stopReason(StopEndTurn, nil)
	default:
		r.log.WarnContext(fctx, "turn failed", "session", w.id, "err", terr)
		tail = append(tail, errorEvent(errorKind(terr), terr.Error()))
		sr = stopReason(StopEndTurn, nil)
	}
	if terr != nil {
		// Tool calls the aborted turn did not get to run still get a result,
		// so every agent.tool_use in the trajectory has one.
		for _, cl := range w.conv.open {
			if !cl.custom && !(cl.ask && cl.decision == "") {
				tail = append(tail, newEvent(EventAgentToolResult, map[string]any{
					"tool_use_id": cl.eventID, "content": textContent("Not run: the turn ended before this tool call ran."), "is_error": true,
				}))
			}
		}
	}
	// Usage and stop reason, then the row, then the event: a client that
	// sees status_idle and reads the session sees it idle, with its totals.
	srJSON, _ := json.Marshal(sr)
	if _, err := r.updateSession(fctx, w.id, func(s *store.ManagedSession) bool {
		s.StopReason = srJSON
		s.ProcessedSeq = max(s.ProcessedSeq, ts.runningSeq)
		if ts.usage != (model.Usage{}) {
			s.Usage = addUsage(s.Usage, ts.usage)
		}
		return true
	}); err != nil && !errors.Is(err, store.ErrNotFound) {
		r.log.WarnContext(fctx, "session usage", "session", w.id, "err", err)
	}
	if err := r.cfg.Store.DeleteRunRow(fctx, w.id, r.cfg.Owner); err != nil && !errors.Is(err, store.ErrNotFound) {
		r.log.ErrorContext(fctx, "delete run row", "session", w.id, "err", err)
	}
	tail = append(tail, idleEvent(sr))
	if evs, err := r.cfg.Events.Append(fctx, w.id, tail); err != nil {
		r.log.ErrorContext(fctx, "append status_idle", "session", w.id, "err", err)
		w.conv = nil
	} else {
		w.appended(fctx, evs)
	}
}

// takeOverStaleRow deletes a run row whose lease expired (its owner died)
// and inserts ours. Recovery proper (seed 003) re-runs such turns; until
// then the session must not stay running forever.
func (w *worker) takeOverStaleRow(ctx context.Context, row *store.RunRow) bool {
	r := w.r
	old, err := r.cfg.Store.GetRunRow(ctx, w.id)
	if err != nil || old.Owner == r.cfg.Owner || old.LeaseExpiresAt.After(r.cfg.Clock.Now()) {
		return false
	}
	if err := r.cfg.Store.DeleteRunRow(ctx, w.id, old.Owner); err != nil {
		return false
	}
	r.log.WarnContext(ctx, "took over an expired run row", "session", w.id, "old_owner", old.Owner)
	_, err = r.cfg.Store.InsertRunRow(ctx, row)
	return err == nil
}

// watch aborts the turn on a user.interrupt sent after it began, and
// renews the run row's lease, until the returned stop is called.
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
				last, _ := r.cfg.Store.LastEventSeq(ctx, w.id)
				row := &store.RunRow{SessionID: w.id, TurnSeq: ts.turnSeq, Owner: r.cfg.Owner,
					LeaseExpiresAt: r.cfg.Clock.Now().Add(r.cfg.Lease), LastProgressSeq: last}
				if _, err := r.cfg.Store.UpdateRunRow(ctx, row, r.cfg.Owner); err != nil && ctx.Err() == nil {
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

// loop calls the model and runs tools until the model ends its turn.
// It returns the idle stop reason.
func (w *worker) loop(ctx context.Context, ts *turnState) (map[string]any, error) {
	r := w.r
	agent, err := w.loadAgent(ctx, ts.s)
	if err != nil {
		return nil, err
	}
	ts.agent = agent
	prov, err := r.cfg.Models.Resolve(agent.Model)
	if err != nil {
		return nil, err
	}
	// A resumed turn first runs (or refuses) the tool calls the user
	// confirmed.
	if err := w.runDecided(ctx, ts); err != nil {
		return nil, err
	}
	for step := 0; step < r.cfg.MaxSteps; step++ {
		req := &model.Request{Model: prov.Model, MaxTokens: prov.MaxTokens, System: agent.System,
			Messages: w.conv.messages(), Tools: agent.Tools.Tools}
		resp, err := w.modelCall(ctx, ts, prov.Provider, req)
		if err != nil {
			return nil, err
		}
		if w.conv.awaiting() {
			var ids []string
			for _, cl := range w.conv.open {
				if cl.custom || (cl.ask && cl.decision == "") {
					ids = append(ids, cl.eventID)
				}
			}
			// Tools that need no confirmation in the same step run now;
			// their results wait with the rest.
			if err := w.runAllowed(ctx, ts); err != nil {
				return nil, err
			}
			return stopReason(StopRequiresAction, ids), nil
		}
		if len(w.conv.open) == 0 {
			if resp.StopReason == model.StopRefusal {
				return stopReason(StopRefusal, nil), nil
			}
			return stopReason(StopEndTurn, nil), nil
		}
		if err := w.runAllowed(ctx, ts); err != nil {
			return nil, err
		}
	}
	return nil, fmt.Errorf("the turn reached its limit of %d model calls", r.cfg.MaxSteps)
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

// modelCall streams one model response between its span events, appending
// each content block as an agent event the moment it is complete.
func (w *worker) modelCall(ctx context.Context, ts *turnState, p model.Provider, req *model.Request) (*model.Response, error) {
	r := w.r
	start := newEvent(EventSpanModelStart, nil)
	evs, err := r.cfg.Events.Append(ctx, w.id, []store.NewEvent{start})
	if err != nil {
		return nil, err
	}
	w.appended(ctx, evs)
	onBlock := func(b model.Block) error {
		ev, ok := w.blockEvent(ts, b)
		if !ok {
			return nil
		}
		if b.Type == model.BlockThinking || b.Type == model.BlockRedactedThinking {
			w.conv.raw[ev.ID] = b
		}
		evs, err := r.cfg.Events.Append(ctx, w.id, []store.NewEvent{ev})
		if err != nil {
			return err
		}
		w.appended(ctx, evs)
		delete(w.conv.raw, ev.ID)
		return nil
	}
	resp, err := p.Stream(ctx, req, onBlock)
	var usage model.Usage
	if resp != nil {
		usage = resp.Usage
	}
	ts.usage = ts.usage.Add(usage)
	end := newEvent(EventSpanModelEnd, map[string]any{
		"model_request_start_id": start.ID, "is_error": err != nil, "model_usage": usageJSON(usage),
	})
	if err == nil && len(resp.ToolUses()) == 0 {
		// The turn ends with this call: the span end goes out with
		// status_idle.
		ts.held = []store.NewEvent{end}
		return resp, nil
	}
	if evs, aerr := r.cfg.Events.Append(context.WithoutCancel(ctx), w.id, []store.NewEvent{end}); aerr == nil {
		w.appended(ctx, evs)
	} else if err == nil {
		err = aerr
	}
	return resp, err
}

// blockEvent is the agent event of a content block.
func (w *worker) blockEvent(ts *turnState, b model.Block) (store.NewEvent, bool) {
	switch b.Type {
	case model.BlockText:
		if b.Text == "" {
			return store.NewEvent{}, false
		}
		return newEvent(EventAgentMessage, map[string]any{"content": textContent(b.Text)}), true
	case model.BlockThinking, model.BlockRedactedThinking:
		return newEvent(EventAgentThinking, nil), true
	case model.BlockToolUse:
		input := map[string]any{}
		_ = json.Unmarshal(b.Input, &input)
		if ts.agent.Tools.Kind(b.Name) == tools.KindCustom {
			return newEvent(EventAgentCustomToolUse, map[string]any{"name": b.Name, "input": input}), true
		}
		perm := "allow"
		if ts.agent.Tools.Asks(b.Name) {
			perm = "ask"
		}
		return newEvent(EventAgentToolUse, map[string]any{"name": b.Name, "input": input, "evaluated_permission": perm}), true
	}
	return store.NewEvent{}, false
}
