package sandbox

import "github.com/agentkernel/agentkernel/internal/store"

// State is a sandbox's lifecycle state (seed 000: cold → warming → active →
// stopping → cold; destroyed is terminal).
type State string

const (
	StateCold      State = store.SandboxCold
	StateWarming   State = store.SandboxWarming
	StateActive    State = store.SandboxActive
	StateStopping  State = store.SandboxStopping
	StateDestroyed State = store.SandboxDestroyed
)

// States lists every state, in lifecycle order.
var States = []State{StateCold, StateWarming, StateActive, StateStopping, StateDestroyed}

// Derive computes the state from the durable facts of the record
// (store.Sandbox.State, where the state machine is written down).
func Derive(sb *store.Sandbox) State { return State(sb.State()) }

// ValidState reports whether s names a state.
func ValidState(s string) bool {
	for _, v := range States {
		if string(v) == s {
			return true
		}
	}
	return false
}
