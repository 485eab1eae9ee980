package sandbox

import "github.com/agentkernel/agentkernel/internal/store"

// State is a sandbox's lifecycle state (seed 000: cold → warming → active →
// stopping → cold; destroyed is terminal).
type State string

const (
	StateCold      State = "cold"
	StateWarming   State = "warming"
	StateActive    State = "active"
	StateStopping  State = "stopping"
	StateDestroyed State = "destroyed"
)

// States lists every state, in lifecycle order.
var States = []State{StateCold, StateWarming, StateActive, StateStopping, StateDestroyed}

// Derive computes the state from the durable facts of the record. It is the
// only place the state machine is written down: the code that changes state
// does so by writing the fact (Handle, WarmedAt, StoppingAt, DestroyedAt).
func Derive(sb *store.Sandbox) State {
	switch {
	case sb.DestroyedAt != nil:
		return StateDestroyed
	case sb.StoppingAt != nil:
		return StateStopping
	case len(sb.Handle) == 0:
		return StateCold
	case sb.WarmedAt == nil:
		return StateWarming
	default:
		return StateActive
	}
}

// ValidState reports whether s names a state.
func ValidState(s string) bool {
	for _, v := range States {
		if string(v) == s {
			return true
		}
	}
	return false
}
