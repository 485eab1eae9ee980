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
func newLineage(st store.Store, events *session.EventLog, wake func(string), ws wsnap.Sandboxes, mgr *sandbox.Manager, rs *resources.Service, log *slog.Logger) *lineage.Service {
	cfg := lineage.Config{Store: st, Publish: events.Publish, Wake: wake, Workspaces: ws, Sandboxes: mgr,
		Log: log.With("component", "lineage")}
	if rs != nil {
		cfg.CopyResources = rs.CopyFor
	}
	return lineage.New(cfg)
}
