package wsnap

import "context"

// Locker gives the host directory of a sandbox's workspace while nothing
// else (hibernation, restore, destroy) touches it (sandbox.Manager).
type Locker interface {
	WithWorkspace(ctx context.Context, tenantID, id string, fn func(dir string) error) error
}

// Sandboxes snapshots sandboxes' workspaces into a Store and seeds new
// sandboxes from the snapshots: what sessions (checkpoints, forks) and the
// monitor (a diagnostic's clone of a workflow's workspace) use.
type Sandboxes struct {
	Locker Locker
	Snaps  *Store
}

// Snapshot stores the sandbox's workspace as it is now and returns the
// snapshot's id.
func (w Sandboxes) Snapshot(ctx context.Context, tenantID, sandboxID string) (string, error) {
	var id string
	err := w.Locker.WithWorkspace(ctx, tenantID, sandboxID, func(dir string) error {
		var err error
		id, _, err = w.Snaps.Write(ctx, dir)
		return err
	})
	return id, err
}

// Seeder returns what fills an empty workspace with the snapshot
// (sandbox.CreateParams.Seed).
func (w Sandboxes) Seeder(snapshot string) func(context.Context, string) error {
	return func(ctx context.Context, dir string) error {
		_, err := w.Snaps.Restore(ctx, snapshot, dir)
		return err
	}
}
