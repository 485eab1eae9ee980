package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// loop calls the model and runs tools until the model ends its turn.
// It returns the idle stop reason. Steps are numbered from 1 within the
// turn (step 0 holds the tool calls confirmed before it); a recovered turn
// starts again at the last step the journal knows.
func (w *worker) loop(ctx context.Context, ts *turnState) (map[string]any, error) {
	r := w.r
	agent, err := w.loadAgent(ctx, ts.s)
	if err != nil {
		return nil, err
	}
	ts.agent, ts.tools = agent, agent.Tools
	pctx := ctx
	if w.conv.selfHosted {
		pctx = WithSelfHosted(ctx)
	}
	system, err := r.systemPrompt(pctx, ts.s, agent.System)
	if err != nil {
		return nil, err
	}
	prov, err := r.cfg.Models.Resolve(agent.Model)
	if err != nil {
		return nil, err
	}
	// The MCP servers are connected before anything runs: a call the user
	// confirmed while the session was idle goes to its server too.
	if err := w.connectMCP(ctx, ts); err != nil {
		return nil, err
	}
	defer w.closeMCP(ts)
	if len(agent.Roster) > 0 && ts.s.ThreadOf == "" {
		// A coordinator (threads themselves do not delegate: depth 1).
		roster, err := w.roster(ctx, agent)
		if err != nil {
			return nil, err
		}
		var skipped []string
		if ts.tools, skipped = ts.tools.WithDaemon(threadTools(roster)); len(skipped) > 0 {
			r.log.WarnContext(ctx, "thread tools shadowed by the agent's own tools", "session", w.id, "tools", skipped)
		}
	}
	// A resumed turn first runs (or refuses) the tool calls the user
	// confirmed.
	if err := w.runDecided(ctx, ts); err != nil {
		return nil, err
	}
	step := int64(1)
	if ts.recovered {
		last, err := w.lastModelStep(ctx, ts)
		if err != nil {
			return nil, err
		}
		if last > 0 {
			step = last
			resp, known, err := w.replayStep(ctx, ts, step)
			if err != nil {
				return nil, err
			}
			if known {
				sr, err := w.afterModel(ctx, ts, resp, step)
				if sr != nil && err == nil {
					sr, err = w.settle(ctx, ts, prov, sr, step)
				}
				if sr != nil || err != nil {
					return sr, err
				}
				step++
			}
		}
	}
	for n := 0; n < r.cfg.MaxSteps; n, step = n+1, step+1 {
		// Between steps the interrupt flag is honoured (seed 004): an
		// interrupt the live watch missed still ends the turn here.
		if n > 0 && w.interrupted(ctx) {
			return nil, errInterrupt
		}
		ts.step = step
		req := &model.Request{Model: prov.Model, MaxTokens: prov.MaxTokens, System: system, Tools: ts.tools.Tools}
		if err := w.fitContext(ctx, ts, prov, req, step); err != nil {
			return nil, err
		}
		resp, err := w.modelCall(ctx, ts, prov, req, step)
		if err != nil {
			return nil, err
		}
		w.counted(req, resp)
		sr, err := w.afterModel(ctx, ts, resp, step)
		if sr != nil && err == nil {
			if sr, err = w.settle(ctx, ts, prov, sr, step); sr == nil && err == nil {
				n = -1 // a revision gets the turn's model calls afresh
			}
		}
		if sr != nil || err != nil {
			return sr, err
		}
	}
	return nil, fmt.Errorf("the turn reached its limit of %d model calls", r.cfg.MaxSteps)
}

// settle is where an answer that ends the turn meets the outcome being
// worked on: it returns nil (the agent goes on) when the grader sends it
// back to work, else the stop reason unchanged.
func (w *worker) settle(ctx context.Context, ts *turnState, prov *model.Resolved, sr map[string]any, step int64) (map[string]any, error) {
	if sr["type"] != StopEndTurn {
		return sr, nil
	}
	// A coordinator's turn ends when its threads are done; their answers
	// send it back to work.
	if again, err := w.awaitThreads(ctx); err != nil || again {
		return nil, err
	}
	again, err := w.outcomeNext(ctx, ts, prov, step)
	if err != nil || !again {
		return sr, err
	}
	return nil, nil
}

// afterModel acts on a model response: it returns the stop reason when
// the turn ends here, else runs the step's tool calls and returns nil.
func (w *worker) afterModel(ctx context.Context, ts *turnState, resp *model.Response, step int64) (map[string]any, error) {
	if w.conv.awaiting() {
		var ids []string
		for _, cl := range w.conv.open {
			if cl.waits() {
				ids = append(ids, cl.eventID)
			}
		}
		// Tools that need no confirmation in the same step run now;
		// their results wait with the rest.
		if err := w.runAllowed(ctx, ts, step); err != nil {
			return nil, err
		}
		if err := w.ensureWork(ctx, ts); err != nil {
			return nil, err
		}
		return stopReason(StopRequiresAction, ids), nil
	}
	if len(w.conv.open) == 0 {
		if len(resp.ToolUses()) > 0 {
			// A recovered step whose tool calls all have their results
			// (the process died before the next model request): the
			// model hears them at the next step.
			return nil, nil
		}
		if resp.StopReason == model.StopRefusal {
			return stopReason(StopRefusal, nil), nil
		}
		return stopReason(StopEndTurn, nil), nil
	}
	return nil, w.runAllowed(ctx, ts, step)
}

// replayStep recovers the journal's last model request of the turn. A
// completed one is replayed from its record; a started one that delivered
// tool uses before it died is taken as answered with them. known=false
// leaves the step to modelCall, which goes on from the partial output.
func (w *worker) replayStep(ctx context.Context, ts *turnState, step int64) (*model.Response, bool, error) {
	opID, err := journal.OpID(journal.KindModelRequest, map[string]any{"model": w.modelName(ts)}, ts.turnSeq, step, 0)
	if err != nil {
		return nil, false, err
	}
	op, err := w.r.cfg.Store.GetOp(ctx, w.id, opID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("read the op journal: %w", err)
	}
	act, err := journal.Decide(op.Kind, journal.State{Completed: op.Status == store.OpCompleted})
	if err != nil {
		return nil, false, err
	}
	var resp *model.Response
	switch {
	case act == journal.Replay:
		var res modelResult
		if err := json.Unmarshal(op.Result, &res); err != nil {
			return nil, false, fmt.Errorf("op %s: recorded result: %w", opID, err)
		}
		resp = &model.Response{Content: res.Content, StopReason: res.StopReason}
	case len(w.conv.open) > 0:
		// The call died after it delivered tool uses: they are its
		// response; the next step tells the model their results.
		resp = &model.Response{Content: w.stepBlocks(ctx, ts, step), StopReason: model.StopToolUse}
		if err := w.completeModelOp(ctx, opID, resp); err != nil {
			return nil, false, err
		}
	default:
		// Resend or Continue: modelCall decides again, knowing the
		// provider.
		return nil, false, nil
	}
	return resp, true, w.closeSpan(ctx, ts, resp, nil, nil)
}

func (w *worker) modelName(ts *turnState) string {
	if p, err := w.r.cfg.Models.Resolve(ts.agent.Model); err == nil {
		return p.Model
	}
	return ts.agent.Model
}

// lastModelStep is the step of the turn's last journalled model request
// (0 when it made none).
func (w *worker) lastModelStep(ctx context.Context, ts *turnState) (int64, error) {
	ops, err := w.r.cfg.Store.ListOps(ctx, w.id, ts.turnSeq)
	if err != nil {
		return 0, fmt.Errorf("read the op journal: %w", err)
	}
	var last int64
	for _, op := range ops {
		if op.Kind == journal.KindModelRequest {
			last = max(last, op.Step)
		}
	}
	return last, nil
}

// modelResult is a model request's op_completed record.
type modelResult struct {
	Content    []model.Block `json:"content"`
	StopReason string        `json:"stop_reason"`
	Usage      model.Usage   `json:"usage"`
}

// modelCall makes the step's model request as a journalled op (seed 003):
// op_started before the request, in the write of the span's start; each
// content block appended as an agent event the moment it is complete (a
// built-in tool use with its call's op_started, see appendBlock), and as
// a stream chunk; op_completed with the response. The op id goes with
// the request as its idempotency key (sent where the provider's route
// names an idempotency header).
// Found in the journal, the op is decided by journal.Decide: a completed
// request is replayed from its record; a started one is resent as it was,
// under the same key, when the upstream dedupes on it, else it goes on
// from what it delivered — its blocks are the assistant prefill of a new
// request. Either way blocks already delivered are not delivered again.
// When it goes on, the text of the block it was streaming (saved per
// batch, turn_partial.go) ends that prefill, and the answer's first block
// is joined to it.
func (w *worker) modelCall(ctx context.Context, ts *turnState, prov *model.Resolved, req *model.Request, step int64) (*model.Response, error) {
	r := w.r
	p := prov.Provider
	opID, err := journal.OpID(journal.KindModelRequest, map[string]any{"model": req.Model}, ts.turnSeq, step, 0)
	if err != nil {
		return nil, err
	}
	req.IdempotencyKey = opID
	args, _ := json.Marshal(map[string]any{"model": req.Model})
	// op_started is stored with the span's start, in one write; an op
	// already in the journal refuses both, and is decided below.
	start := newEvent(EventSpanModelStart, nil)
	start.Op = &store.EventOp{Start: &store.Op{ID: opID, SessionID: w.id, Kind: journal.KindModelRequest,
		TurnSeq: ts.turnSeq, Step: step, Args: args, Status: store.OpStarted, StartedAt: r.cfg.Clock.Now()}}
	evs, err := r.cfg.Events.Append(ctx, w.id, []store.NewEvent{start})
	var op *store.Op
	if errors.Is(err, store.ErrAlreadyExists) {
		if found, gerr := r.cfg.Store.GetOp(ctx, w.id, opID); gerr == nil {
			op = found
		}
	}
	resumed, resend := false, false
	switch {
	case op != nil:
		act, derr := journal.Decide(op.Kind, journal.State{Completed: op.Status == store.OpCompleted,
			Keyed: prov.Route.IdempotencyHeader != ""})
		if derr != nil {
			return nil, derr
		}
		switch act {
		case journal.Replay:
			// Only a step replayStep already took can get here twice.
			var res modelResult
			if err := json.Unmarshal(op.Result, &res); err != nil {
				return nil, fmt.Errorf("op %s: recorded result: %w", opID, err)
			}
			resp := &model.Response{Content: res.Content, StopReason: res.StopReason}
			return resp, w.closeSpan(ctx, ts, resp, nil, nil)
		case journal.Resend:
			resumed, resend = true, true
			dropPrefill(req)
		case journal.Continue:
			resumed = true
			trimPrefill(req)
		default:
			return nil, fmt.Errorf("op %s: no model request recovery for %q", opID, act)
		}
	case err != nil:
		return nil, fmt.Errorf("journal the model request: %w", err)
	default:
		w.appended(ctx, evs)
	}
	if resumed && w.conv.spanOpen == "" {
		evs, err := r.cfg.Events.Append(ctx, w.id, []store.NewEvent{newEvent(EventSpanModelStart, nil)})
		if err != nil {
			return nil, err
		}
		w.appended(ctx, evs)
	}
	r.failpoint(FailBeforeModelRequest)
	// Blocks the interrupted call already delivered are not delivered
	// again when the new request repeats them.
	var dupTexts []string
	dupThinking := 0
	if resumed {
		dupTexts, dupThinking = append([]string(nil), w.conv.stepTexts...), w.conv.stepThinkings
	}
	var partial []model.Block
	if resumed {
		partial = w.stepBlocks(ctx, ts, step)
	}
	// A resent request is answered whole: its response replaces, not
	// extends, what the cut-off one delivered.
	prefix := partial
	if resend {
		prefix = nil
	}
	chunkSeq := int64(len(partial))
	// A provider that continues a prefill is asked to go on from the text
	// of the block the interrupted call was streaming; what it answers is
	// joined to that text, so the block is delivered once, whole.
	ps, canContinue := p.(model.PartialStreamer)
	saver := &partialSaver{w: w, ts: ts, step: step, block: -1}
	contText := ""
	if resumed && !resend && canContinue {
		contText = prefillPartial(req, w.inProgress(ctx, ts, step, partial))
		saver.cont = contText
	}
	deliver := func(b model.Block) error {
		switch {
		case b.Type == model.BlockText && takeString(&dupTexts, b.Text):
			return nil
		case (b.Type == model.BlockThinking || b.Type == model.BlockRedactedThinking) && dupThinking > 0:
			dupThinking--
			return nil
		}
		ev, ok := w.blockEvent(ts, b)
		if !ok {
			return nil
		}
		if b.Type == model.BlockThinking || b.Type == model.BlockRedactedThinking {
			w.conv.raw[ev.ID] = b
		}
		if err := w.appendBlock(ctx, ts, step, ev); err != nil {
			return err
		}
		delete(w.conv.raw, ev.ID)
		if b.Type == model.BlockToolUse {
			b.ID = ev.ID // the id the conversation uses from now on
		}
		data, _ := json.Marshal(b)
		chunkSeq++
		if _, err := r.cfg.Store.AppendStreamChunk(ctx, &store.StreamChunk{SessionID: w.id, TurnSeq: ts.turnSeq, Step: step, Data: data}); err != nil {
			return fmt.Errorf("keep partial model output: %w", err)
		}
		if b.Type == model.BlockText {
			r.failpoint(FailMidModelStream)
		}
		return nil
	}
	cont := contText // until the response's first block takes it
	onBlock := func(b model.Block) error {
		if cont == "" {
			return deliver(b)
		}
		text := cont
		cont = ""
		if b.Type == model.BlockText {
			b.Text = text + b.Text
			return deliver(b)
		}
		if err := deliver(model.Text(text)); err != nil {
			return err
		}
		return deliver(b)
	}
	var resp *model.Response
	if canContinue {
		resp, err = ps.StreamPartial(ctx, req, onBlock, func(d model.Delta) error { return saver.onDelta(ctx, d, chunkSeq) })
	} else {
		resp, err = p.Stream(ctx, req, onBlock)
	}
	if err == nil && cont != "" {
		// The model added nothing: the interrupted block is delivered as
		// it was.
		err = deliver(model.Text(cont))
	}
	var (
		usage model.Usage
		done  *store.EventOp // the op's op_completed, for the span's end to carry
	)
	if resp != nil {
		usage = resp.Usage
	}
	ts.usage = ts.usage.Add(usage)
	if err == nil {
		if contText != "" {
			resp.Content = continued(resp.Content, contText)
		}
		resp.Content = append(prefix, resp.Content...)
		if len(w.conv.open) > 0 && w.conv.spanOpen != "" {
			// closeSpan appends the span's end next: op_completed goes
			// in that write.
			done = &store.EventOp{Complete: &store.OpCompletion{ID: opID, Result: modelOpResult(resp)}}
		} else if cerr := w.completeModelOp(ctx, opID, resp); cerr != nil {
			err = cerr
		}
	}
	if err != nil && ctx.Err() != nil {
		// Shutdown or interrupt: an interrupt's span end goes out with
		// the turn's end below; a shutdown leaves the span to recovery.
		if !errors.Is(context.Cause(ctx), errInterrupt) && !errors.Is(context.Cause(ctx), errDestroying) {
			return resp, err
		}
	}
	return resp, w.closeSpan(ctx, ts, &model.Response{Content: respContent(resp), Usage: usage}, err, done)
}

func respContent(resp *model.Response) []model.Block {
	if resp == nil {
		return nil
	}
	return resp.Content
}

// closeSpan appends the open span's end, carrying done (the call's
// op_completed) when set: modelCall sets it only when the end is appended
// here, a step with tool uses. When the call ends the turn (no tool use)
// the end is held for the turn's closing write.
func (w *worker) closeSpan(ctx context.Context, ts *turnState, resp *model.Response, callErr error, done *store.EventOp) error {
	if w.conv.spanOpen == "" {
		return callErr
	}
	end := newEvent(EventSpanModelEnd, map[string]any{
		"model_request_start_id": w.conv.spanOpen, "is_error": callErr != nil, "model_usage": usageJSON(resp.Usage),
	})
	if callErr == nil && len(w.conv.open) == 0 {
		ts.held = []store.NewEvent{end}
		w.conv.spanOpen = ""
		return nil
	}
	end.Op = done
	evs, err := w.r.cfg.Events.Append(context.WithoutCancel(ctx), w.id, []store.NewEvent{end})
	if err != nil && done != nil {
		// The op stays started (recovery takes the step as answered by
		// the tool uses it delivered); the span still ends, in error.
		callErr = fmt.Errorf("journal the model response: %w", err)
		end = newEvent(EventSpanModelEnd, map[string]any{
			"model_request_start_id": w.conv.spanOpen, "is_error": true, "model_usage": usageJSON(resp.Usage),
		})
		evs, err = w.r.cfg.Events.Append(context.WithoutCancel(ctx), w.id, []store.NewEvent{end})
	}
	if err == nil {
		w.appended(ctx, evs)
	} else if callErr == nil {
		callErr = err
	}
	return callErr
}

// modelOpResult is a model request's op_completed record.
func modelOpResult(resp *model.Response) json.RawMessage {
	res, _ := json.Marshal(modelResult{Content: resp.Content, StopReason: resp.StopReason, Usage: resp.Usage})
	return res
}

func (w *worker) completeModelOp(ctx context.Context, opID string, resp *model.Response) error {
	res := modelOpResult(resp)
	_, err := w.r.cfg.Store.CompleteOp(context.WithoutCancel(ctx), w.id, opID, res)
	if err != nil && !errors.Is(err, store.ErrConflict) {
		return fmt.Errorf("journal the model response: %w", err)
	}
	return nil
}

// stepBlocks reads the step's partial output back from the stream chunks.
func (w *worker) stepBlocks(ctx context.Context, ts *turnState, step int64) []model.Block {
	chunks, err := w.r.cfg.Store.ListStreamChunks(ctx, w.id, ts.turnSeq, step)
	if err != nil {
		w.r.log.WarnContext(ctx, "read partial model output", "session", w.id, "err", err)
		return nil
	}
	out := make([]model.Block, 0, len(chunks))
	for _, c := range chunks {
		var b model.Block
		if json.Unmarshal(c.Data, &b) == nil {
			out = append(out, b)
		}
	}
	return out
}

// dropPrefill makes a resent request the request that was cut off: the
// blocks it delivered (the conversation's trailing assistant message) are
// its answer's, not part of what was asked.
func dropPrefill(req *model.Request) {
	if n := len(req.Messages); n > 0 && req.Messages[n-1].Role == model.RoleAssistant {
		req.Messages = req.Messages[:n-1]
	}
}

// trimPrefill: the Messages API refuses a final assistant message that
// ends in whitespace.
func trimPrefill(req *model.Request) {
	n := len(req.Messages)
	if n == 0 || req.Messages[n-1].Role != model.RoleAssistant {
		return
	}
	m := &req.Messages[n-1]
	m.Content = append([]model.Block(nil), m.Content...)
	if k := len(m.Content) - 1; k >= 0 && m.Content[k].Type == model.BlockText {
		m.Content[k].Text = strings.TrimRight(m.Content[k].Text, " \t\n")
	}
}

// takeString removes one s from *set and reports whether it was there.
func takeString(set *[]string, s string) bool {
	for i, v := range *set {
		if v == s {
			*set = append((*set)[:i:i], (*set)[i+1:]...)
			return true
		}
	}
	return false
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
		if ts.tools.Kind(b.Name) == tools.KindCustom {
			return newEvent(EventAgentCustomToolUse, map[string]any{"name": b.Name, "input": input}), true
		}
		perm := "allow"
		if ts.tools.Asks(b.Name) {
			perm = "ask"
		}
		if ref, ok := ts.tools.MCP(b.Name); ok {
			return newEvent(EventAgentMCPToolUse, map[string]any{"name": ref.Tool, "mcp_server_name": ref.Server, "input": input, "evaluated_permission": perm}), true
		}
		return newEvent(EventAgentToolUse, map[string]any{"name": b.Name, "input": input, "evaluated_permission": perm}), true
	}
	return store.NewEvent{}, false
}
