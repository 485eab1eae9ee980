package daemon

import (
	"log/slog"
	"path/filepath"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/vault"
)

// newResources builds the session resources service (nil without Managed
// Agents storage) and registers its /mnt binds with the sandbox manager.
// The files and memory services are given with SetFiles and SetMemory.
func newResources(cfg config.Config, st store.Store, mgr *sandbox.Manager, vaults *vault.Service, log *slog.Logger) *resources.Service {
	if vaults == nil || mgr == nil {
		return nil
	}
	svc := resources.New(resources.Config{
		Store: st, Keys: vaults.Keys(), Dir: filepath.Join(cfg.Home, "resources"), Sandboxes: mgr,
		Log: log.With("component", "resources"),
	})
	mgr.AddHooks(svc.Hooks())
	return svc
}

// Resources returns the session resources service (nil without Managed
// Agents storage).
func (d *Daemon) Resources() *resources.Service { return d.resources }
