package daemon

import (
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// newObjectRuntime builds the durable object runtime on the sandbox
// manager: [[objects]] classes, [durable_objects] limits. It registers its
// sandbox hooks, so it must exist before the first object sandbox wakes.
func newObjectRuntime(cfg config.Config, st store.Store, mgr *sandbox.Manager, reg prometheus.Registerer, log *slog.Logger) (*object.Runtime, error) {
	return object.New(object.Config{
		Store:     st,
		Sandboxes: mgr,
		Classes:   cfg.Objects,
		Limits:    cfg.DurableObjects,
		Log:       log.With("component", "objects"),
		Registry:  reg,
		Failpoint: failpointHook(cfg.Home, log),
	})
}
