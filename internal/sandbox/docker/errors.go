package docker

import (
	"fmt"

	"github.com/moby/moby/client"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// unavailable turns a failure to reach dockerd into a *sandbox.UnavailableError
// that says what to do; any other error is returned unchanged.
func (d *Driver) unavailable(err error) error {
	if err == nil || !client.IsErrConnectionFailed(err) {
		return err
	}
	return &sandbox.UnavailableError{
		Driver: Name,
		Reason: fmt.Sprintf("cannot reach dockerd at %s (%v): start dockerd or install docker.io",
			d.cli.DaemonHost(), err),
	}
}
