package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// reattachWait is how long one GET /ops long poll waits for a running op.
const reattachWait = time.Minute

// ambiguousResult is what the agent sees for an op that may or may not
// have had its effect (seed 003): never a silent re-run.
func ambiguousResult(opID string) *guest.ToolResult {
	return &guest.ToolResult{IsError: true, Content: fmt.Sprintf("operation %s may have executed; verify before retrying", opID)}
}

// toolOpID is the journal id of a tool call: its name and input at its
// position (the turn, the step, its index among the step's tool uses), so
// two identical calls are two ops and a replayed one is the same op.
func toolOpID(ts *turnState, cl *call, step int64) (string, json.RawMessage, error) {
	a := map[string]any{"name": cl.name, "input": cl.input}
	if ts.s != nil && ts.s.ThreadOf != "" {
		// A thread shares its parent's sandbox, whose guest keys its op
		// record by op id alone: the same call at the same position in
		// two threads is two ops.
		a["thread"] = ts.s.ID
	}
	args, err := json.Marshal(a)
	if err != nil {
		return "", nil, err
	}
	id, err := journal.OpID(journal.KindToolExec, args, ts.turnSeq, step, cl.index)
	return id, args, err
}

// appendBlock appends a content block's agent event as it streams in. A
// built-in tool use that needs no confirmation carries its op_started
// (journalToolUse), so the call costs the journal no transaction of its
// own before the guest is asked.
func (w *worker) appendBlock(ctx context.Context, ts *turnState, step int64, ev store.NewEvent) error {
	r := w.r
	opID := w.journalToolUse(ts, step, &ev)
	evs, err := r.cfg.Events.Append(ctx, w.id, []store.NewEvent{ev})
	if errors.Is(err, store.ErrAlreadyExists) && ev.Op != nil {
		// The op is in the journal already: the event goes alone, and
		// journalledTool decides the call by the op it finds.
		ev.Op, opID = nil, ""
		evs, err = r.cfg.Events.Append(ctx, w.id, []store.NewEvent{ev})
	}
	if err != nil {
		return err
	}
	w.appended(ctx, evs)
	if opID == "" {
		return nil
	}
	// The op id was derived before the event was folded; the call the
	// conversation now holds must have the same one, else the row stays
	// unused and journalledTool starts the call's own op.
	if cl := w.conv.find(ev.ID); cl != nil {
		if id, _, err := toolOpID(ts, cl, step); err == nil && id == opID {
			if ts.started == nil {
				ts.started = map[string]bool{}
			}
			ts.started[opID] = true
			r.failpoint(FailAfterToolUse)
			return nil
		}
	}
	r.log.WarnContext(ctx, "tool use journalled under another op id than its call's", "session", w.id, "op_id", opID)
	return nil
}

// journalToolUse sets ev.Op to the op_started of the call ev opens when it
// is a built-in tool use that runs without confirmation (journalledTool
// runs it next) in the foreground, and returns the op id ("" when ev
// carries none).
func (w *worker) journalToolUse(ts *turnState, step int64, ev *store.NewEvent) string {
	if ev.Type != EventAgentToolUse {
		return ""
	}
	var b eventBody
	if json.Unmarshal(ev.Data, &b) != nil || ts.tools.Kind(b.Name) != tools.KindBuiltin || b.EvaluatedPermission == "ask" {
		return ""
	}
	cl := &call{name: b.Name, input: callInput(b.Input), index: w.conv.nextToolIndex()}
	if _, bg := tools.Background(cl.name, cl.input); bg {
		// A background start found started is looked for among the
		// guest's processes, not its op records: a start that never
		// reached the guest would read as ambiguous. It keeps StartOp.
		return ""
	}
	opID, args, err := toolOpID(ts, cl, step)
	if err != nil {
		return ""
	}
	ev.Op = &store.EventOp{Start: &store.Op{ID: opID, SessionID: w.id, Kind: journal.KindToolExec,
		TurnSeq: ts.turnSeq, Step: step, Index: cl.index, Args: args, Status: store.OpStarted, StartedAt: w.r.cfg.Clock.Now()}}
	return opID
}

// journalledTool runs one tool call through the op journal (seed 003):
// op_started before the guest is asked — written with the call's
// agent.tool_use (appendBlock) or, for a call that came another way (a
// confirmed one, a recovered turn's), here — and op_completed with the
// result, returned as done for the agent.tool_result event to carry
// (runAllowed), so it commits with that event. Found in the journal, a
// completed call is replayed from its record (done is nil); a started one
// is decided by the guest's own durable record of the op id: a result is
// read back, a call never accepted is run, a running one is reattached
// to, and one accepted by a guest that is gone with no result is
// ambiguous.
func (w *worker) journalledTool(ctx context.Context, ts *turnState, cl *call, step int64, sbID string) (res *guest.ToolResult, done *store.EventOp, err error) {
	r := w.r
	opID, args, err := toolOpID(ts, cl, step)
	if err != nil {
		return nil, nil, err
	}
	var op *store.Op
	if ts.started[opID] {
		// Started with its tool use by this turn; no one asked the guest.
		delete(ts.started, opID)
	} else {
		op, err = r.cfg.Store.StartOp(ctx, &store.Op{ID: opID, SessionID: w.id, Kind: journal.KindToolExec,
			TurnSeq: ts.turnSeq, Step: step, Index: cl.index, Args: args, Status: store.OpStarted, StartedAt: r.cfg.Clock.Now()})
	}
	switch {
	case errors.Is(err, store.ErrAlreadyExists) && op != nil:
		act, derr := journal.Decide(op.Kind, journal.State{Completed: op.Status == store.OpCompleted})
		switch {
		case derr != nil:
			return nil, nil, derr
		case act == journal.Replay:
			var rec guest.ToolResult
			if err := json.Unmarshal(op.Result, &rec); err != nil {
				return nil, nil, fmt.Errorf("op %s: recorded result: %w", opID, err)
			}
			return &rec, nil, nil
		case act == journal.AskGuest && ts.movedFrom != "":
			// Started in the sandbox the session had on the node it
			// moved from: whether that guest ran it is not known here,
			// and it is never silently run again.
			r.log.WarnContext(ctx, "tool call started on the node the session moved from: outcome unknown", "session", w.id, "op_id", opID, "sandbox", ts.movedFrom)
			res, err = ambiguousResult(opID), nil
		case act == journal.AskGuest:
			res, err = w.recoverTool(ctx, ts, cl, sbID, opID)
		default:
			return nil, nil, fmt.Errorf("op %s: no tool call recovery for %q", opID, act)
		}
	case err != nil:
		return nil, nil, fmt.Errorf("journal the tool call: %w", err)
	default:
		r.failpoint(FailBeforeToolExec)
		if !r.owns(w.id) {
			// Another node took the session over while this turn ran (this
			// node was cut off from the store): the call's op is started,
			// so the owner reports it as possibly run; it is not run here,
			// where its side effects would come on top of the owner's.
			r.log.WarnContext(ctx, "another node owns the session now: its tool call is not run here", "session", w.id, "op_id", opID)
			return nil, nil, errLostRow
		}
		res, err = w.execTool(ctx, ts, cl, sbID, opID)
		if errors.Is(err, guest.ErrOpExists) {
			res, err = w.recoverTool(ctx, ts, cl, sbID, opID)
		}
	}
	if err != nil {
		if c := context.Cause(ctx); errors.Is(c, errInterrupt) || errors.Is(c, errDestroying) {
			// The guest runs a journalled call to its end whoever waits
			// for it; an interrupt must stop it explicitly.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			if cerr := tools.Cancel(cctx, r.cfg.Sandboxes, ts.s.TenantID, sbID, opID); cerr != nil {
				r.log.WarnContext(ctx, "cancel interrupted tool call", "session", w.id, "op_id", opID, "err", cerr)
			}
			cancel()
		}
		return nil, nil, err
	}
	r.failpoint(FailAfterToolExec)
	raw, _ := json.Marshal(res)
	return res, &store.EventOp{Complete: &store.OpCompletion{ID: opID, Result: raw}}, nil
}

// execTool asks the guest to run the call under its op id; a bash call
// with run_in_background starts a background task instead.
func (w *worker) execTool(ctx context.Context, ts *turnState, cl *call, sbID, opID string) (*guest.ToolResult, error) {
	env, err := w.toolEnv(ctx)
	if err != nil {
		return nil, err
	}
	if cmd, ok := tools.Background(cl.name, cl.input); ok {
		return w.startBackground(ctx, ts, sbID, opID, cmd, env)
	}
	return tools.RunEnv(ctx, w.r.cfg.Sandboxes, ts.s.TenantID, sbID, cl.name, cl.input, w.r.cfg.ToolLimits, opID, env)
}

// recoverTool decides a call the journal shows started and not completed.
func (w *worker) recoverTool(ctx context.Context, ts *turnState, cl *call, sbID, opID string) (*guest.ToolResult, error) {
	r := w.r
	if cmd, ok := tools.Background(cl.name, cl.input); ok {
		return w.recoverBackground(ctx, ts, sbID, opID, cmd)
	}
	for ctx.Err() == nil {
		st, err := tools.OpStatus(ctx, r.cfg.Sandboxes, ts.s.TenantID, sbID, opID, reattachWait)
		if err != nil {
			return nil, fmt.Errorf("ask the guest about op %s: %w", opID, err)
		}
		switch st.State {
		case guest.OpStateFinished:
			if st.Result == nil || st.Result.Tool == nil {
				return ambiguousResult(opID), nil
			}
			r.log.InfoContext(ctx, "tool result read back from the guest", "session", w.id, "op_id", opID)
			return st.Result.Tool, nil
		case guest.OpStateUnknown:
			// Never accepted, so it never ran: run it now.
			env, err := w.toolEnv(ctx)
			if err != nil {
				return nil, err
			}
			res, err := tools.RunEnv(ctx, r.cfg.Sandboxes, ts.s.TenantID, sbID, cl.name, cl.input, r.cfg.ToolLimits, opID, env)
			if errors.Is(err, guest.ErrOpExists) {
				continue
			}
			return res, err
		case guest.OpStateRunning:
			r.log.InfoContext(ctx, "reattached to a running tool call", "session", w.id, "op_id", opID)
			continue
		default:
			r.log.WarnContext(ctx, "tool call outcome unknown", "session", w.id, "op_id", opID, "state", st.State)
			return ambiguousResult(opID), nil
		}
	}
	return nil, ctx.Err()
}

// toolEnv is the extra environment of the session's next tool call: each
// environment_variable credential of its vaults, as the variable holding
// its placeholder. Read at every call, so a vault_ids update applies from
// the next one.
func (w *worker) toolEnv(ctx context.Context) (map[string]string, error) {
	if w.r.cfg.Credentials == nil {
		return nil, nil
	}
	s, err := w.r.cfg.Store.GetManagedSession(ctx, w.id)
	if err != nil {
		return nil, err
	}
	ids := SessionVaultIDs(s)
	if len(ids) == 0 {
		return nil, nil
	}
	creds, err := w.r.cfg.Credentials.EnvCredentials(ctx, s.TenantID, ids)
	if err != nil {
		return nil, fmt.Errorf("the session's vault credentials: %w", err)
	}
	env := make(map[string]string, len(creds))
	for _, c := range creds {
		if _, dup := env[c.EnvVar]; !dup { // the first vault in vault_ids wins
			env[c.EnvVar] = c.Placeholder
		}
	}
	return env, nil
}
