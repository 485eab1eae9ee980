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
}

func encodeState(containerID string) []byte {
	b, _ := json.Marshal(state{ContainerID: containerID}) // cannot fail: one string field
	return b
}

// containerID reads the container id out of a handle, so that a driver
// instance that never saw Start can still act on it.
func containerID(h *sandbox.Handle) (string, error) {
	if h == nil {
		return "", errors.New("docker: nil handle")
	}
	if h.Driver != "" && h.Driver != Name {
		return "", fmt.Errorf("docker: handle %s belongs to driver %q", h.ID, h.Driver)
	}
	var s state
	if err := json.Unmarshal(h.State, &s); err != nil {
		return "", fmt.Errorf("docker: handle %s: bad state %q: %w", h.ID, h.State, err)
	}
	if s.ContainerID == "" {
		return "", fmt.Errorf("docker: handle %s: state has no container_id", h.ID)
	}
	return s.ContainerID, nil
}
