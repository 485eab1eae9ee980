package journal

import (
	"fmt"
)

// Action is what recovery does with an op it finds in the journal.
type Action string

// The actions. Each caller of Decide acts on the answer; no caller decides
// a journalled op any other way.
const (
	// Replay: the op completed; its recorded result stands for it and the
	// call is never made again.
	Replay Action = "replay"
	// Resend: send the same request again with the op id as its
	// idempotency key; the upstream collapses the duplicate.
	Resend Action = "resend"
	// Continue: a model request cut off mid-stream is asked again with
	// what it delivered as the assistant prefill; what it delivered is
	// not delivered twice.
	Continue Action = "continue"
	// AskGuest: the guest keeps a durable record of every op id it
	// accepted; its answer (finished, running, never accepted, accepted
	// and gone) decides.
	AskGuest Action = "ask_guest"
	// Redo: the call only reads (a git clone), so it is made again from
	// scratch, into a fresh place.
	Redo Action = "redo"
	// ReportAmbiguous: the call may or may not have had its effect and
	// nothing can tell; the agent is told "operation <op_id> may have
	// executed; verify before retrying", recorded as the op's result.
	ReportAmbiguous Action = "report_ambiguous"
)

// State is what recovery knows of an op found in the journal.
type State struct {
	// Completed: op_completed was written (the result is recorded).
	Completed bool
	// Keyed: the upstream takes the op id as an idempotency key (a model
	// provider with idempotency_header set, an outbound API that
	// documents one).
	Keyed bool
	// ReadOnly: the call only reads from the upstream (a git clone).
	ReadOnly bool
}

// Decide is the recovery rule of every kind, as code: what to do with an
// op of kind found in the journal in state st. A kind with no rule is
// ErrUnknownKind (kinds_test.go fails for any Kind constant Decide does
// not handle). RecoveryRules says the same in words.
func Decide(kind string, st State) (Action, error) {
	started, err := decideStarted(kind, st)
	if err != nil {
		return "", err
	}
	if st.Completed {
		return Replay, nil
	}
	return started, nil
}

// decideStarted is the rule for an op that started and never completed:
// the process died between the call and its result.
func decideStarted(kind string, st State) (Action, error) {
	switch kind {
	case KindModelRequest:
		if st.Keyed {
			return Resend, nil
		}
		return Continue, nil
	case KindToolExec:
		return AskGuest, nil
	case KindOutboundCall:
		switch {
		case st.ReadOnly:
			return Redo, nil
		case st.Keyed:
			return Resend, nil
		}
		return ReportAmbiguous, nil
	case KindThreadCall:
		// Keyed by construction: every write of the call carries an id
		// derived from the op id, and the store refuses a second one.
		return Resend, nil
	case KindMCPCall:
		// MCP has no idempotency key and the server keeps no record the
		// daemon can ask; a read-only hint the server merely claims does
		// not make a re-run safe.
		return ReportAmbiguous, nil
	}
	return "", fmt.Errorf("journal: no recovery rule for op kind %q: %w", kind, ErrUnknownKind)
}
