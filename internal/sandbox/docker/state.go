package docker

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// state is the driver's opaque Handle.State.
type state struct {
	ContainerID string `json:"container_id"`
	// RunDir is Spec.RunDir and PID the container's init (the guest) as
	// the engine reported it at start, in the daemon's pid namespace: Dial
	// talks only to a socket in RunDir that this pid listens on.
	RunDir string `json:"run_dir,omitempty"`
	PID    int    `json:"pid,omitempty"`
}

func encodeState(containerID string) []byte { return state{ContainerID: containerID}.encode() }

func (s state) encode() []byte {
	b, _ := json.Marshal(s) // cannot fail: strings and an int
	return b
}

// decodeState reads a handle's state; containerID is never empty.
func decodeState(h *sandbox.Handle) (*state, error) {
	if h == nil {
		return nil, errors.New("docker: nil handle")
	}
	if h.Driver != "" && h.Driver != Name {
		return nil, fmt.Errorf("docker: handle %s belongs to driver %q", h.ID, h.Driver)
	}
	var s state
	if err := json.Unmarshal(h.State, &s); err != nil {
		return nil, fmt.Errorf("docker: handle %s: bad state %q: %w", h.ID, h.State, err)
	}
	if s.ContainerID == "" {
		return nil, fmt.Errorf("docker: handle %s: state has no container_id", h.ID)
	}
	return &s, nil
}

// containerID reads the container id out of a handle, so that a driver
// instance that never saw Start can still act on it.
func containerID(h *sandbox.Handle) (string, error) {
	s, err := decodeState(h)
	if err != nil {
		return "", err
	}
	return s.ContainerID, nil
}
