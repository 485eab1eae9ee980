package managed

import (
	"context"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// EventUserDefineOutcome gives the agent a task a grader evaluates
// (session/outcome.go).
const EventUserDefineOutcome = session.EventUserDefineOutcome

// defineOutcome validates a user.define_outcome
// (BetaManagedAgentsUserDefineOutcomeEventParams) and gives it its outc_
// id and its max_iterations. open says an earlier outcome of the session
// is still being worked on: one outcome runs at a time.
func defineOutcome(ev Obj, open string) (map[string]any, error) {
	desc, err := ev.ReqStr("description")
	if err != nil {
		return nil, err
	}
	if !ev.Set("rubric") {
		return nil, badRequest("field %q is required: {\"type\": \"text\", \"content\": \"…\"}", ev.Field("rubric"))
	}
	rub, _, err := ev.Object("rubric")
	if err != nil {
		return nil, err
	}
	typ, err := rub.ReqStr("type")
	if err != nil {
		return nil, err
	}
	var content string
	switch typ {
	case "text":
		if content, err = rub.ReqStr("content"); err != nil {
			return nil, err
		}
	case "file":
		return nil, rub.NotYet("type", "file rubrics; send the rubric as {\"type\": \"text\", \"content\": \"…\"}")
	default:
		return nil, badRequest("field %q: unknown rubric type %q (want text)", rub.Field("type"), typ)
	}
	maxIter, set, err := ev.Int("max_iterations")
	if err != nil {
		return nil, err
	}
	if !set {
		maxIter = session.DefaultOutcomeIterations
	}
	if maxIter < 1 || maxIter > session.MaxOutcomeIterations {
		return nil, badRequest("field %q must be between 1 and %d, got %d", ev.Field("max_iterations"), session.MaxOutcomeIterations, maxIter)
	}
	if open != "" {
		return nil, badRequest("field %q: outcome %s of this session is still being worked on; one outcome runs at a time (interrupt it, or wait for its span.outcome_evaluation_end)", ev.Field("type"), open)
	}
	return map[string]any{"description": desc, "rubric": map[string]any{"type": "text", "content": content},
		"max_iterations": maxIter, "outcome_id": ids.New("outc")}, nil
}

// openOutcome is the id of the session's outcome still being worked on
// ("" when none): defined and not settled.
func (s *Service) openOutcome(ctx context.Context, sessionID string) (string, error) {
	if sessionID == "" {
		return "", nil
	}
	evs, err := s.outcomeEvents(ctx, sessionID)
	if err != nil {
		return "", err
	}
	for _, o := range session.OutcomeEvaluations(evs) {
		switch o["result"] {
		case session.OutcomePending, session.OutcomeRunning, session.OutcomeEvaluating:
			return fmt.Sprint(o["outcome_id"]), nil
		}
	}
	return "", nil
}

// outcomeEvents reads the events a session's outcome state folds from:
// those from its first user.define_outcome on (a session without one, the
// usual case, costs one query that finds nothing).
func (s *Service) outcomeEvents(ctx context.Context, sessionID string) ([]store.SessionEvent, error) {
	first, err := s.st.ListEvents(ctx, store.ListEventsParams{SessionID: sessionID, Types: []string{session.EventUserDefineOutcome}, Limit: 1})
	if err != nil || len(first) == 0 {
		return nil, err
	}
	var out []store.SessionEvent
	after := first[0].Seq - 1
	for {
		evs, err := s.st.ListEvents(ctx, store.ListEventsParams{SessionID: sessionID, AfterSeq: after, Types: session.OutcomeEventTypes, Limit: 1000})
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
		if len(evs) < 1000 {
			return out, nil
		}
		after = evs[len(evs)-1].Seq
	}
}
