package session

import (
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Closing returns the events that close a log cut right after evs (the
// whole log up to the cut, in Seq order) — the end of a fork, or what a
// rewind keeps: when a turn is open there (begun and not ended), its model
// span ends, each of its tool calls that waits for no user gets a "not
// run" result, and session.status_idle ends it. A log that ends between
// turns needs nothing.
func Closing(evs []store.SessionEvent) []store.NewEvent {
	// As a cloud session's: a sandbox tool a self_hosted session's worker
	// had not answered gets "not run" too (the cut log's turn ends here).
	c := newConvo(false)
	for _, ev := range evs {
		c.fold(ev)
	}
	if !c.turnOpen() {
		return nil
	}
	var out []store.NewEvent
	if c.spanOpen != "" {
		out = append(out, newEvent(EventSpanModelEnd, map[string]any{
			"model_request_start_id": c.spanOpen, "is_error": true, "model_usage": usageJSON(model.Usage{}),
		}))
	}
	for _, cl := range c.open {
		if !cl.custom && !(cl.ask && cl.decision == "") {
			out = append(out, resultEvent(cl, textContent("Not run: the session's history was cut before this tool call ran (fork or rewind)."), true))
		}
	}
	return append(out, idleEvent(stopReason(StopEndTurn, nil)))
}
