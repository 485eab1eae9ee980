package daemon

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentkernel/agentkernel/internal/lineage"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/wsnap"
)

// workspaces gives sessions their workspace snapshots (session.Workspaces):
// a sandbox's workspace is read on the host, under the sandbox's lock, into
// the content-addressed snapshot store, and a new sandbox is seeded from
// one.
type workspaces struct {
	sandboxes *sandbox.Manager
	snaps     *wsnap.Store
}

func (w workspaces) Snapshot(ctx context.Context, tenantID, sandboxID string) (string, error) {
	var id string
	err := w.sandboxes.WithWorkspace(ctx, tenantID, sandboxID, func(dir string) error {
		var err error
		id, _, err = w.snaps.Write(ctx, dir)
		return err
	})
	return id, err
}

func (w workspaces) Seeder(snapshot string) func(context.Context, string) error {
	return func(ctx context.Context, dir string) error {
		_, err := w.snaps.Restore(ctx, snapshot, dir)
		return err
	}
}

// snapshotGC collects workspace snapshots for the blob collector: the live
// ones are those a checkpoint or a session's seed names.
type snapshotGC struct {
	snaps *wsnap.Store
	st    store.BranchStore
}

func (g snapshotGC) Prefix() string { return wsnap.Prefix }

func (g snapshotGC) Collect(ctx context.Context, grace time.Duration, now time.Time) error {
	live, err := g.st.ListWorkspaceSnapshots(ctx)
	if err != nil {
		return err
	}
	_, err = g.snaps.Collect(ctx, live, grace, now)
	return err
}

// newLineage builds the fork and rewind service.
func newLineage(st store.Store, events *session.EventLog, wake func(string), ws workspaces, mgr *sandbox.Manager, rs *resources.Service, log *slog.Logger) *lineage.Service {
	cfg := lineage.Config{Store: st, Publish: events.Publish, Wake: wake, Workspaces: ws, Sandboxes: mgr,
		Log: log.With("component", "lineage")}
	if rs != nil {
		cfg.CopyResources = rs.CopyFor
	}
	return lineage.New(cfg)
}
