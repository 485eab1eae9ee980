package daemon

import (
	"context"
	"fmt"
	"github.com/agentkernel/agentkernel/internal/api"
	"github.com/agentkernel/agentkernel/internal/cluster"
	"log/slog"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/envwork"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/packages"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/skills"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/vault"
)

// newSessionRuntime builds the runtime that runs Managed Agents turns:
// models from [models], tools in sandboxes from the manager, events
// through the API's event log.
// sessionServices are the services a session's turns use beside the store
// and the sandboxes; nil ones are left out.
type sessionServices struct {
	vaults    *vault.Service
	skills    *skills.Service
	packages  *packages.Service
	resources *resources.Service
	// workspaces snapshots workspaces at step boundaries and seeds forks'.
	workspaces session.Workspaces
	// work is the work queue of self_hosted environments (nil: none).
	work *envwork.Queue
	// cluster is this node when several daemons share the store.
	cluster *cluster.Node
}

// priceList is [prices] over the built-in Claude prices.
func priceList(cfg config.Config) *model.PriceList {
	prices := make(map[string]model.Price, len(cfg.Prices))
	for pattern, p := range cfg.Prices {
		var mp model.Price
		mp.Input, mp.Output, mp.CacheRead, mp.CacheWrite = p.Rates()
		prices[pattern] = mp
	}
	return model.NewPriceList(prices)
}

func newSessionRuntime(cfg config.Config, st store.Store, events *session.EventLog, mgr *sandbox.Manager, svc sessionServices, log *slog.Logger) (*session.Runtime, error) {
	routes := make([]model.Route, 0, len(cfg.Models))
	for pattern, m := range cfg.Models {
		routes = append(routes, model.Route{
			Pattern: pattern, Provider: m.Provider, BaseURL: m.BaseURL, APIKey: m.APIKey,
			APIKeyEnv: m.APIKeyEnv, File: m.File, Model: m.Model, MaxTokens: m.MaxTokens,
			IdempotencyHeader: m.IdempotencyHeader, ContextWindow: m.ContextWindow, CompactAt: m.CompactAt,
		})
	}
	reg, err := model.NewRegistry(model.RegistryConfig{Routes: routes, Log: log})
	if err != nil {
		return nil, fmt.Errorf("[models]: %w", err)
	}
	host := nodeID(cfg)
	rtCfg := session.RuntimeConfig{
		Store: st, Events: events, Models: reg,
		// The boot id changes with every start, so a run row names the
		// process that owns the turn, not just the machine.
		Owner:         host + "/" + ids.New("boot"),
		Failpoint:     failpointHook(cfg.Home, log),
		BackgroundCap: cfg.Sandbox.BackgroundCap.D(),
		Log:           log,
	}
	if n := svc.cluster; n != nil {
		// Only the owner of a session runs its turns; a dead owner's run
		// rows are orphans once the cluster's lease period passed.
		rtCfg.Lease = n.TTL()
		rtCfg.Owns = func(id string) bool {
			ctx, cancel := context.WithTimeout(context.Background(), n.TTL())
			defer cancel()
			rt, err := n.Route(ctx, api.SessionResource(id))
			return err == nil && rt.Local
		}
		rtCfg.Holds = func(id string) bool { return n.Owns(api.SessionResource(id)) }
	}
	if mgr != nil {
		rtCfg.Sandboxes = mgr
		if svc.skills != nil {
			// The agent's skills under /workspace/skills/, listed in the
			// system prompt.
			rtCfg.Context = append(rtCfg.Context, skills.NewHook(svc.skills, mgr))
		}
		if svc.packages != nil {
			rtCfg.Packages = svc.packages
		}
		rtCfg.Workspaces = svc.workspaces
	}
	if svc.vaults != nil {
		rtCfg.Credentials = svc.vaults
		rtCfg.MCPAuth = svc.vaults
	}
	if svc.resources != nil {
		rtCfg.Context = append(rtCfg.Context, svc.resources)
	}
	if svc.work != nil {
		rtCfg.Work = svc.work
	}
	return session.NewRuntime(rtCfg)
}
