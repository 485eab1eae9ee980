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
)

// verdictTool is the tool the grader answers with, so its verdict is
// structured whatever the model (a text answer holding the same JSON is
// taken too).
const verdictTool = "submit_verdict"

var verdictSchema = json.RawMessage(`{"type":"object","properties":{` +
	`"result":{"type":"string","enum":["satisfied","needs_revision","failed"],"description":"satisfied: the work meets every criterion of the rubric; needs_revision: it does not yet; failed: the rubric cannot apply to this work"},` +
	`"explanation":{"type":"string","description":"Why. For needs_revision, which criteria are unmet and what to change."}},` +
	`"required":["result","explanation"]}`)

const graderSystem = "You are an outcome grader. You evaluate an AI agent's work against a rubric. " +
	"Judge only what the transcript shows. Answer by calling " + verdictTool + " exactly once."

// maxTranscript bounds the transcript the grader reads (its tail is kept:
// the latest work is what is graded).
const maxTranscript = 200_000

// graderResult is the op_completed record of a grader request.
type graderResult struct {
	Verdict verdict     `json:"verdict"`
	Usage   model.Usage `json:"usage"`
}

// outcomeNext decides, at the end of a model answer that ends the turn,
// whether the agent goes on: it runs the grader when the active outcome's
// latest work has not been evaluated, and reports true when a verdict
// (needs_revision, or max_iterations_reached's final acknowledgment) sends
// the agent back to work. Everything it decides on is in the log, so a
// recovered turn decides the same.
func (w *worker) outcomeNext(ctx context.Context, ts *turnState, prov *model.Resolved, step int64) (bool, error) {
	o := w.conv.oc.active()
	if o == nil {
		// The acknowledgment turn after the last evaluation, once.
		cur := w.conv.oc.cur
		return cur != nil && cur.Result == OutcomeMaxIterations && !cur.Worked && w.conv.turnOpen(), nil
	}
	if o.StartID == "" && !o.Worked && len(o.Verdicts) > 0 {
		// The verdict is in the log; the revision it asked for is not begun.
		return true, nil
	}
	res, err := w.evaluate(ctx, ts, prov, o, step)
	if err != nil {
		return false, err
	}
	return res == OutcomeNeedsRevision || res == OutcomeMaxIterations, nil
}

// evaluate runs one evaluation of o: span.outcome_evaluation_start, the
// grader's request as a journalled model_request op (a completed one is
// replayed, never asked again), span.outcome_evaluation_ongoing while it
// runs, and span.outcome_evaluation_end with the verdict.
func (w *worker) evaluate(ctx context.Context, ts *turnState, prov *model.Resolved, o *outcome, step int64) (string, error) {
	r := w.r
	// The model call's span end the turn held goes before the evaluation,
	// in one write with its start and first heartbeat (a resumed one gets
	// a heartbeat only).
	iter := int64(len(o.Verdicts))
	evs := ts.held
	if o.StartID == "" {
		evs = append(evs, newEvent(EventOutcomeEvalStart, map[string]any{"outcome_id": o.ID, "iteration": iter}))
	}
	evs = append(evs, ongoingEvent(o, iter))
	if err := w.appendEvents(ctx, evs...); err != nil {
		return "", err
	}
	ts.held = nil
	startID := o.StartID
	args := map[string]any{"model": prov.Model, "outcome_id": o.ID, "iteration": iter}
	opID, err := journal.OpID(journal.KindModelRequest, args, ts.turnSeq, step, 0)
	if err != nil {
		return "", err
	}
	rawArgs, _ := json.Marshal(args)
	op, err := r.cfg.Store.StartOp(ctx, &store.Op{ID: opID, SessionID: w.id, Kind: journal.KindModelRequest,
		TurnSeq: ts.turnSeq, Step: step, Args: rawArgs, Status: store.OpStarted, StartedAt: r.cfg.Clock.Now()})
	var gr *graderResult
	switch {
	case errors.Is(err, store.ErrAlreadyExists) && op != nil && op.Status == store.OpCompleted:
		// Graded before a crash: the verdict is replayed, not asked again.
		gr = &graderResult{}
		if err := json.Unmarshal(op.Result, gr); err != nil {
			return "", fmt.Errorf("op %s: recorded verdict: %w", opID, err)
		}
	case errors.Is(err, store.ErrAlreadyExists):
		// Started and cut off: the grader's answer never arrived, and a
		// verdict has no partial output worth keeping; it is asked again.
	case err != nil:
		return "", fmt.Errorf("journal the grader request: %w", err)
	}
	if gr == nil {
		gr, err = w.grade(ctx, ts, prov, o, iter, opID)
		if err != nil {
			end := OutcomeFailed
			if errors.Is(context.Cause(ctx), errInterrupt) {
				end = OutcomeInterrupted
			}
			if ctx.Err() != nil && end != OutcomeInterrupted {
				return "", err // shutdown: recovery goes on with the evaluation
			}
			_ = w.appendEvents(context.WithoutCancel(ctx), evalEnd(o, startID, iter, end, "The grader could not evaluate: "+err.Error(), model.Usage{}))
			return "", err
		}
	}
	ts.usage = ts.usage.Add(gr.Usage)
	v := gr.Verdict
	if v.Result == OutcomeNeedsRevision && iter+1 >= o.MaxIterations {
		v.Result = OutcomeMaxIterations
	}
	if err := w.appendEvents(ctx, evalEnd(o, startID, iter, v.Result, v.Explanation, gr.Usage)); err != nil {
		return "", err
	}
	return v.Result, nil
}

func evalEnd(o *outcome, startID string, iter int64, result, explanation string, u model.Usage) store.NewEvent {
	return newEvent(EventOutcomeEvalEnd, map[string]any{"outcome_id": o.ID, "outcome_evaluation_start_id": startID,
		"iteration": iter, "result": result, "explanation": explanation, "usage": spanUsage(u)})
}

// spanUsage is BetaManagedAgentsSpanModelUsage.
func spanUsage(u model.Usage) map[string]any {
	m := usageJSON(u)
	m["speed"] = "standard"
	return m
}

func ongoingEvent(o *outcome, iter int64) store.NewEvent {
	return newEvent(EventOutcomeEvalOngoing, map[string]any{"outcome_id": o.ID, "iteration": iter})
}

// grade asks the grader, with span.outcome_evaluation_ongoing going out
// every OutcomeHeartbeat until it answers, and journals its verdict.
func (w *worker) grade(ctx context.Context, ts *turnState, prov *model.Resolved, o *outcome, iter int64, opID string) (*graderResult, error) {
	r := w.r
	ongoing := func() error { return w.appendEvents(ctx, ongoingEvent(o, iter)) }
	r.failpoint(FailMidEvaluation)
	req := &model.Request{Model: prov.Model, MaxTokens: prov.MaxTokens, System: graderSystem, Purpose: model.PurposeGrader,
		Messages: graderMessages(o, w.conv.messages()), IdempotencyKey: opID,
		Tools: []model.Tool{{Name: verdictTool, Description: "Record your verdict on the agent's work.", InputSchema: verdictSchema}}}
	done := make(chan struct{})
	beat := make(chan struct{})
	go func() {
		defer close(beat)
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-r.cfg.Clock.After(r.cfg.OutcomeHeartbeat):
				if err := ongoing(); err != nil {
					r.log.WarnContext(ctx, "outcome heartbeat", "session", w.id, "err", err)
				}
			}
		}
	}()
	resp, err := prov.Provider.Stream(ctx, req, func(model.Block) error { return nil })
	close(done)
	<-beat
	if err != nil {
		return nil, err
	}
	gr := &graderResult{Verdict: parseVerdict(resp), Usage: resp.Usage}
	res, _ := json.Marshal(gr)
	if _, err := r.cfg.Store.CompleteOp(context.WithoutCancel(ctx), w.id, opID, res); err != nil && !errors.Is(err, store.ErrConflict) {
		return nil, fmt.Errorf("journal the verdict: %w", err)
	}
	return gr, nil
}

// parseVerdict reads the grader's answer: the verdict tool's input, else
// a JSON object in its text. An answer without a usable verdict is a
// failed evaluation that says so.
func parseVerdict(resp *model.Response) verdict {
	var v verdict
	for _, b := range resp.Content {
		if b.Type == model.BlockToolUse && b.Name == verdictTool && json.Unmarshal(b.Input, &v) == nil && validVerdict(v.Result) {
			return v
		}
	}
	for _, b := range resp.Content {
		if b.Type != model.BlockText {
			continue
		}
		if i, j := strings.IndexByte(b.Text, '{'), strings.LastIndexByte(b.Text, '}'); i >= 0 && j > i &&
			json.Unmarshal([]byte(b.Text[i:j+1]), &v) == nil && validVerdict(v.Result) {
			return v
		}
	}
	return verdict{Result: OutcomeFailed, Explanation: "The grader answered without a verdict (want a " + verdictTool + " call with result satisfied, needs_revision or failed)."}
}

func validVerdict(r string) bool {
	return r == OutcomeSatisfied || r == OutcomeNeedsRevision || r == OutcomeFailed
}

// graderMessages is the grader's conversation: the task and rubric, then
// per earlier evaluation its verdict (as the grader's own tool call) and
// the note that the agent revised, the last user message holding the
// agent's transcript as it is now. The grader thus sees what it asked for
// before; the n-th evaluation's request has n assistant messages.
func graderMessages(o *outcome, agent []model.Message) []model.Message {
	head := "The agent was given this task:\n\n" + o.Description + "\n\nRubric:\n\n" + o.Rubric + "\n\n"
	transcript := "The agent's transcript so far:\n\n" + renderTranscript(agent) +
		"\n\nEvaluate the work against the rubric and call " + verdictTool + "."
	if len(o.Verdicts) == 0 {
		return []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text(head + transcript)}}}
	}
	msgs := []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text(head + "(The transcript you evaluated first is left out.)")}}}
	for i, v := range o.Verdicts {
		in, _ := json.Marshal(v)
		id := fmt.Sprintf("verdict_%d", i)
		msgs = append(msgs, model.Message{Role: model.RoleAssistant, Content: []model.Block{{Type: model.BlockToolUse, ID: id, Name: verdictTool, Input: in}}})
		note := "Recorded. The agent revised its work."
		if i == len(o.Verdicts)-1 {
			note += " " + transcript
		}
		msgs = append(msgs, model.Message{Role: model.RoleUser, Content: []model.Block{
			{Type: model.BlockToolResult, ToolUseID: id, Content: []model.Block{model.Text("recorded")}}, model.Text(note)}})
	}
	return msgs
}

// renderTranscript writes the agent's conversation as text, its tail
// kept within maxTranscript.
func renderTranscript(msgs []model.Message) string {
	var sb strings.Builder
	for _, m := range msgs {
		for _, b := range m.Content {
			switch b.Type {
			case model.BlockText:
				fmt.Fprintf(&sb, "[%s] %s\n", m.Role, b.Text)
			case model.BlockToolUse:
				fmt.Fprintf(&sb, "[tool call %s] %s\n", b.Name, b.Input)
			case model.BlockToolResult:
				var parts []string
				for _, c := range b.Content {
					parts = append(parts, c.Text)
				}
				fmt.Fprintf(&sb, "[tool result%s] %s\n", map[bool]string{true: " (error)"}[b.IsError], strings.Join(parts, ""))
			}
		}
	}
	s := sb.String()
	if len(s) > maxTranscript {
		s = "[…earlier transcript cut…]\n" + s[len(s)-maxTranscript:]
	}
	return s
}

// appendEvents appends runtime events and folds them.
func (w *worker) appendEvents(ctx context.Context, evs ...store.NewEvent) error {
	out, err := w.r.cfg.Events.Append(ctx, w.id, evs)
	if err != nil {
		return err
	}
	w.appended(ctx, out)
	return nil
}

// openEvalEnd closes an evaluation the turn's end cut short, so every
// span.outcome_evaluation_start has its end.
func (w *worker) openEvalEnd(status store.RunStatus, cause error) []store.NewEvent {
	o := w.conv.oc.cur
	if o == nil || o.StartID == "" {
		return nil
	}
	if status == store.RunInterrupted {
		return []store.NewEvent{evalEnd(o, o.StartID, o.Cycle, OutcomeInterrupted, "The evaluation was interrupted.", model.Usage{})}
	}
	return []store.NewEvent{evalEnd(o, o.StartID, o.Cycle, OutcomeFailed, "The evaluation did not finish: "+errText(cause), model.Usage{})}
}
