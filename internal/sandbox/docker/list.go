package docker

import (
	"context"
	"fmt"

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
		// Enough to stop, inspect and destroy it; not to talk to its guest
		// (no secret), which only the store's handle allows.
		handles = append(handles, &sandbox.Handle{ID: c.Labels[LabelSandbox], Driver: Name, State: encodeState(c.ID)})
	}
	return handles, nil
}
