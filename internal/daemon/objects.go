package daemon

import (
	"github.com/agentkernel/agentkernel/internal/cluster"
	"log/slog"
	"path/filepath"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// newObjectRuntime builds the durable object runtime on the sandbox
// manager: [[objects]] classes, [durable_objects] limits, tenants' bundles
// in the blob store (their uploads pinned against the blob GC), unpacked
// under $home/bundles (private to the daemon: no sandbox mounts anything of
// the home but its own workspace). It registers its sandbox hooks, so it
// must exist before the first object sandbox wakes.
func newObjectRuntime(cfg config.Config, st store.Store, mgr *sandbox.Manager, blobs blob.Store, pins blob.Pinner, node *cluster.Node, reg prometheus.Registerer, log *slog.Logger) (*object.Runtime, error) {
	var ost store.ObjectStore = st
	if node != nil {
		// A write of an object another node took over is refused.
		ost = node.FencedObjects(st)
	}
	return object.New(object.Config{
		Cluster:   node,
		Store:     ost,
		Sandboxes: mgr,
		Classes:   cfg.Objects,
		Limits:    cfg.DurableObjects,
		// No app_dir may show these at /app.
		PrivatePaths: []string{cfg.Home, cfg.StatePath(), cfg.BlobPath(), cfg.SandboxRunDir(), cfg.SandboxDataDir()},
		Blobs:        blobs,
		BundleDir:    filepath.Join(cfg.Home, "bundles"),
		BlobPins:     pins,
		Log:          log.With("component", "objects"),
		Registry:     reg,
		Failpoint:    failpointHook(cfg.Home, log),
	})
}
