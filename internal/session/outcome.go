package session

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Outcomes (user.define_outcome): the agent works on a task, and after
// each turn-ending answer a grader model checks the work against a rubric;
// a verdict of needs_revision sends the agent back to work with the
// grader's explanation, up to the outcome's max_iterations evaluations.
// Everything about an outcome is read off the event log (the define event,
// the evaluation spans, the status events), so a worker that folds the log
// afresh after a crash knows exactly where the outcome stands.

// Outcome event types (anthropic-sdk-go's BetaManagedAgents*Event).
const (
	EventUserDefineOutcome     = "user.define_outcome"
	EventOutcomeEvalStart      = "span.outcome_evaluation_start"
	EventOutcomeEvalOngoing    = "span.outcome_evaluation_ongoing"
	EventOutcomeEvalEnd        = "span.outcome_evaluation_end"
	DefaultOutcomeIterations   = 3
	MaxOutcomeIterations       = 20
	outcomeFeedbackPreambleFmt = "An outcome grader evaluated your work (evaluation %d of at most %d) against the rubric and found that it does not meet it yet:\n\n%s\n\n"
)

// Outcome results: the verdicts of span.outcome_evaluation_end and the
// states of the session's outcome_evaluations (BetaManagedAgentsOutcome
// EvaluationResource.result).
const (
	OutcomePending        = "pending"
	OutcomeRunning        = "running"
	OutcomeEvaluating     = "evaluating"
	OutcomeSatisfied      = "satisfied"
	OutcomeNeedsRevision  = "needs_revision"
	OutcomeMaxIterations  = "max_iterations_reached"
	OutcomeFailed         = "failed"
	OutcomeInterrupted    = "interrupted"
	outcomeTypeEvaluation = "outcome_evaluation"
)

// OutcomeEventTypes are the events an outcome's state is folded from.
var OutcomeEventTypes = []string{EventUserDefineOutcome, EventStatusRunning, EventStatusIdle, EventOutcomeEvalStart, EventOutcomeEvalEnd}

// outcome is one defined outcome as the log tells it.
type outcome struct {
	ID, Description, Rubric string
	MaxIterations           int64
	// Cycle is the 0-indexed revision cycle the outcome is on (the
	// resource's iteration); the next evaluation's iteration is
	// len(Verdicts).
	Cycle int64
	// StartID is the open evaluation's span.outcome_evaluation_start id
	// ("" when none is open).
	StartID string
	// Result is the state (OutcomePending … OutcomeInterrupted);
	// Explanation the last verdict's text. Verdicts keeps every verdict,
	// in order, for the grader's own history.
	Result      string
	Explanation string
	Verdicts    []verdict
	// Worked: the agent made a model call since the last verdict (so its
	// work is new to the grader).
	Worked      bool
	CompletedAt *time.Time
}

type verdict struct {
	Result      string `json:"result"`
	Explanation string `json:"explanation"`
}

func terminalOutcome(result string) bool {
	switch result {
	case OutcomeSatisfied, OutcomeMaxIterations, OutcomeFailed, OutcomeInterrupted:
		return true
	}
	return false
}

// outcomeBody is the stored shape of the outcome events.
type outcomeBody struct {
	OutcomeID     string `json:"outcome_id"`
	Description   string `json:"description"`
	MaxIterations int64  `json:"max_iterations"`
	Rubric        struct {
		Type    string `json:"type"`
		Content string `json:"content"`
	} `json:"rubric"`
	Iteration   int64  `json:"iteration"`
	Result      string `json:"result"`
	Explanation string `json:"explanation"`
	StopReason  *struct {
		Type string `json:"type"`
	} `json:"stop_reason"`
}

// outcomes folds the outcome state of a session's events.
type outcomes struct {
	all []*outcome
	// queued: defined, not yet taken by a turn (status_running takes it).
	queued []*outcome
	// cur is the outcome the running (or last) turn works on.
	cur *outcome
}

// fold applies one event; it returns the user text the event adds to the
// agent's conversation (the task of a define, the feedback of a verdict
// that sends the agent back to work).
func (o *outcomes) fold(ev store.SessionEvent) []model.Block {
	var b outcomeBody
	if json.Unmarshal(ev.Data, &b) != nil {
		return nil
	}
	at := ev.CreatedAt
	switch ev.Type {
	case EventUserDefineOutcome:
		oc := &outcome{ID: b.OutcomeID, Description: b.Description, Rubric: b.Rubric.Content,
			MaxIterations: b.MaxIterations, Result: OutcomePending}
		o.all = append(o.all, oc)
		o.queued = append(o.queued, oc)
		return defineText(b)
	case EventStatusRunning:
		for _, q := range o.queued {
			if o.cur != nil && !terminalOutcome(o.cur.Result) && o.cur != q {
				// A later definition supersedes an open one.
				o.cur.Result, o.cur.CompletedAt = OutcomeInterrupted, &at
			}
			o.cur = q
			q.Result = OutcomeRunning
		}
		o.queued = nil
	case EventSpanModelStart:
		if o.cur != nil {
			o.cur.Worked = true
		}
	case EventOutcomeEvalStart:
		if oc := o.find(b.OutcomeID); oc != nil {
			oc.StartID, oc.Cycle, oc.Result = ev.ID, b.Iteration, OutcomeEvaluating
		}
	case EventOutcomeEvalEnd:
		oc := o.find(b.OutcomeID)
		if oc == nil {
			return nil
		}
		oc.StartID, oc.Cycle, oc.Worked = "", b.Iteration, false
		oc.Result, oc.Explanation = b.Result, b.Explanation
		oc.Verdicts = append(oc.Verdicts, verdict{Result: b.Result, Explanation: b.Explanation})
		switch b.Result {
		case OutcomeNeedsRevision:
			oc.Result, oc.Cycle = OutcomeRunning, b.Iteration+1
			return []model.Block{model.Text(fmt.Sprintf(outcomeFeedbackPreambleFmt, b.Iteration+1, oc.MaxIterations, b.Explanation) +
				"Revise your work so that it meets the rubric, then end your turn; it will be evaluated again.")}
		case OutcomeMaxIterations:
			oc.CompletedAt = &at
			return []model.Block{model.Text(fmt.Sprintf(outcomeFeedbackPreambleFmt, b.Iteration+1, oc.MaxIterations, b.Explanation) +
				"That was the last evaluation: no further one follows. Acknowledge this briefly and summarise where the work stands.")}
		default:
			oc.CompletedAt = &at
		}
	case EventStatusIdle:
		// A turn that ends other than waiting for the user (an interrupt,
		// an error, a refusal) ends its outcome.
		if oc := o.cur; oc != nil && !terminalOutcome(oc.Result) &&
			(b.StopReason == nil || b.StopReason.Type != StopRequiresAction) {
			oc.Result, oc.StartID, oc.CompletedAt = OutcomeInterrupted, "", &at
		}
	}
	return nil
}

func (o *outcomes) find(id string) *outcome {
	for _, oc := range o.all {
		if oc.ID == id {
			return oc
		}
	}
	return nil
}

// active is the outcome the current turn works on, unless it is settled.
func (o *outcomes) active() *outcome {
	if o.cur == nil || terminalOutcome(o.cur.Result) {
		return nil
	}
	return o.cur
}

// defineText is what the agent reads of an outcome it is given.
func defineText(b outcomeBody) []model.Block {
	return []model.Block{model.Text("Your task:\n\n" + b.Description +
		"\n\nWhen you end your turn, a grader evaluates your work against this rubric:\n\n" + b.Rubric.Content)}
}

// OutcomeEvaluations is the session's outcome_evaluations
// (BetaManagedAgentsOutcomeEvaluationResource, one per define_outcome),
// folded from its events of OutcomeEventTypes in Seq order.
func OutcomeEvaluations(evs []store.SessionEvent) []map[string]any {
	var o outcomes
	for _, ev := range evs {
		o.fold(ev)
	}
	out := make([]map[string]any, 0, len(o.all))
	for _, oc := range o.all {
		var done any
		if oc.CompletedAt != nil {
			done = oc.CompletedAt.UTC()
		}
		iter := oc.Cycle
		out = append(out, map[string]any{"type": outcomeTypeEvaluation, "outcome_id": oc.ID, "description": oc.Description,
			"result": oc.Result, "explanation": oc.Explanation, "iteration": iter, "completed_at": done})
	}
	return out
}
