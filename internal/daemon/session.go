package daemon

import (
	"fmt"
	"log/slog"
	"os"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/vault"
)

// newSessionRuntime builds the runtime that runs Managed Agents turns:
// models from [models], tools in sandboxes from the manager, events
// through the API's event log.
func newSessionRuntime(cfg config.Config, st store.Store, events *session.EventLog, mgr *sandbox.Manager, vaults *vault.Service, res *resources.Service, log *slog.Logger) (*session.Runtime, error) {
	routes := make([]model.Route, 0, len(cfg.Models))
	for pattern, m := range cfg.Models {
		routes = append(routes, model.Route{
			Pattern: pattern, Provider: m.Provider, BaseURL: m.BaseURL, APIKey: m.APIKey,
			APIKeyEnv: m.APIKeyEnv, File: m.File, Model: m.Model, MaxTokens: m.MaxTokens,
		})
	}
	reg, err := model.NewRegistry(model.RegistryConfig{Routes: routes, Log: log})
	if err != nil {
		return nil, fmt.Errorf("[models]: %w", err)
	}
	host, _ := os.Hostname()
	if host == "" {
		host = "node"
	}
	rtCfg := session.RuntimeConfig{
		Store: st, Events: events, Models: reg,
		// The boot id changes with every start, so a run row names the
		// process that owns the turn, not just the machine.
		Owner:     host + "/" + ids.New("boot"),
		Failpoint: failpointHook(cfg.Home, log),
		Log:       log,
	}
	if mgr != nil {
		rtCfg.Sandboxes = mgr
	}
	if vaults != nil {
		rtCfg.Credentials = vaults
		rtCfg.MCPAuth = vaults
	}
	if res != nil {
		rtCfg.Context = append(rtCfg.Context, res)
	}
	return session.NewRuntime(rtCfg)
}
