package daemon

import (
	"fmt"
	"log/slog"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/monitor"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// newMonitor builds the agent task monitor ([monitor]) on the sandbox
// manager. It is nil when [monitor] disabled is set.
func newMonitor(cfg config.Config, st store.Store, mgr *sandbox.Manager, ws monitor.Workspaces, log *slog.Logger) (*monitor.Service, error) {
	mc := cfg.Monitor
	if mc.Disabled {
		return nil, nil
	}
	ms, ok := st.(monitor.Store)
	if !ok {
		return nil, fmt.Errorf("monitor: the %s store does not implement the monitor store", st.Engine())
	}
	return monitor.New(monitor.Config{
		Node:       nodeID(cfg),
		Store:      ms,
		Sandboxes:  mgr,
		Workspaces: ws,
		Log:        log.With("component", "monitor"),
		Thresholds: monitor.Thresholds{
			Idle: mc.IdleThreshold.D(), Heartbeat: mc.HeartbeatTimeout.D(),
			StuckRunning: mc.StuckRunningThreshold.D(), PostCompletion: mc.PostCompletionTimeout.D(),
		},
		CheckInterval: mc.CheckInterval.D(),
		Failpoint:     failpointHook(cfg.Home, log),
		Stop:          mc.Stop,
		EventSkew:     mc.EventSkew.D(),
		MaxEventBytes: int(mc.MaxEventBytes),
		Diagnostics: monitor.DiagnosticConfig{
			Interval:       mc.DiagnosticInterval.D(),
			StuckThreshold: mc.StuckThreshold.D(),
			Rules: store.DiagnosticRules{MaxPerWorkflow: mc.MaxDiagnosticsPerWorkflow,
				MaxConsecutiveFailures: mc.MaxConsecutiveFailures, Cooldown: mc.DiagnosticCooldown.D()},
			Command: mc.DiagnosticCommand,
		},
	})
}
