package docker

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/moby/moby/client"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// List returns a handle for every container this driver created, running or
// not, found by label, so that the daemon can reattach to or clean up
// sandboxes its store does not know.
func (d *Driver) List(ctx context.Context) ([]*sandbox.Handle, error) {
	res, err := d.cli.ContainerList(ctx, client.ContainerListOptions{
		All:     true,
		Filters: make(client.Filters).Add("label", LabelManaged+"=true"),
	})
	if err != nil {
		return nil, fmt.Errorf("docker: list: %w", d.unavailable(err))
	}
	handles := make([]*sandbox.Handle, 0, len(res.Items))
	for _, c := range res.Items {
		h := &sandbox.Handle{ID: c.Labels[LabelSandbox], Driver: Name, State: encodeState(c.ID)}
		for _, m := range c.Mounts {
			if m.Destination == sandbox.GuestDir {
				h.SocketPath = filepath.Join(m.Source, sandbox.GuestSocketName)
			}
		}
		handles = append(handles, h)
	}
	return handles, nil
}
