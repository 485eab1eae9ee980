package config

import (
	"fmt"
	"time"
)

// MonitorConfig is [monitor]: the seed 001 constants of the sandbox monitor
// and the diagnostic safeguards. Zero durations and counts mean the default.
type MonitorConfig struct {
	// Disabled turns off the monitor, the task runner and the diagnostic
	// sweep (AGENTKERNEL_MONITOR_DISABLED=true); the API still records.
	Disabled bool `toml:"disabled"`
	// CheckInterval is how often every monitored sandbox is checked.
	CheckInterval Duration `toml:"check_interval"`
	// IdleThreshold: no work events for this long = idle.
	IdleThreshold Duration `toml:"idle_threshold"`
	// HeartbeatTimeout: no heartbeat for this long = dead.
	HeartbeatTimeout Duration `toml:"heartbeat_timeout"`
	// StuckRunningThreshold: "running" heartbeats but no work this long = stuck.
	StuckRunningThreshold Duration `toml:"stuck_running_threshold"`
	// PostCompletionTimeout: a completed agent's sandbox is cleaned up after it.
	PostCompletionTimeout Duration `toml:"post_completion_timeout"`
	// EventSkew is how far in the future an event's timestamp may be.
	EventSkew Duration `toml:"event_skew"`
	// MaxEventBytes bounds one event's data.
	MaxEventBytes int64 `toml:"max_event_bytes"`
	// Stop is what termination does to the sandbox: "hibernate" (default:
	// the workspace stays, verified in a backup) or "destroy".
	Stop string `toml:"stop"`

	// DiagnosticInterval is how often find_stuck_workflows runs.
	DiagnosticInterval Duration `toml:"diagnostic_interval"`
	// StuckThreshold: a workflow is stuck this long after its last task ended.
	StuckThreshold Duration `toml:"stuck_threshold"`
	// DiagnosticCooldown is the minimum time between two spawns per workflow.
	DiagnosticCooldown Duration `toml:"diagnostic_cooldown"`
	// MaxDiagnosticsPerWorkflow caps diagnostic spawns per ticket.
	MaxDiagnosticsPerWorkflow int64 `toml:"max_diagnostics_per_workflow"`
	// MaxConsecutiveFailures stops diagnostics after this many failed ones.
	MaxConsecutiveFailures int64 `toml:"max_consecutive_failures"`
	// DiagnosticCommand is the diagnostic agent's argv (file only); empty =
	// diagnostics are detected and recorded but no task is spawned.
	DiagnosticCommand []string `toml:"diagnostic_command"`
}

// DefaultMonitor returns the seed's constants.
func DefaultMonitor() MonitorConfig {
	return MonitorConfig{
		CheckInterval:             Duration(30 * time.Second),
		IdleThreshold:             Duration(3 * time.Minute),
		HeartbeatTimeout:          Duration(90 * time.Second),
		StuckRunningThreshold:     Duration(10 * time.Minute),
		PostCompletionTimeout:     Duration(5 * time.Minute),
		EventSkew:                 Duration(5 * time.Second),
		MaxEventBytes:             64 << 10,
		Stop:                      "hibernate",
		DiagnosticInterval:        Duration(60 * time.Second),
		StuckThreshold:            Duration(60 * time.Second),
		DiagnosticCooldown:        Duration(5 * time.Minute),
		MaxDiagnosticsPerWorkflow: 3,
		MaxConsecutiveFailures:    2,
	}
}

// validateMonitor checks [monitor]; zero values take the defaults.
func (c *Config) validateMonitor() []error {
	var errs []error
	m := &c.Monitor
	def := DefaultMonitor()
	durs := []struct {
		name string
		v    *Duration
		def  Duration
		min  time.Duration
	}{
		{"check_interval", &m.CheckInterval, def.CheckInterval, 10 * time.Millisecond},
		{"idle_threshold", &m.IdleThreshold, def.IdleThreshold, time.Second},
		{"heartbeat_timeout", &m.HeartbeatTimeout, def.HeartbeatTimeout, time.Second},
		{"stuck_running_threshold", &m.StuckRunningThreshold, def.StuckRunningThreshold, time.Second},
		{"post_completion_timeout", &m.PostCompletionTimeout, def.PostCompletionTimeout, time.Second},
		{"event_skew", &m.EventSkew, def.EventSkew, 0},
		{"diagnostic_interval", &m.DiagnosticInterval, def.DiagnosticInterval, 10 * time.Millisecond},
		{"stuck_threshold", &m.StuckThreshold, def.StuckThreshold, 0},
		{"diagnostic_cooldown", &m.DiagnosticCooldown, def.DiagnosticCooldown, 0},
	}
	for _, d := range durs {
		if *d.v == 0 {
			*d.v = d.def
		}
		if d.v.D() < d.min {
			errs = append(errs, &FieldError{Field: "monitor." + d.name, Value: d.v.D().String(),
				Accepted: fmt.Sprintf("a duration of at least %s", d.min), Reason: "too short"})
		}
	}
	ints := []struct {
		name string
		v    *int64
		def  int64
	}{
		{"max_event_bytes", &m.MaxEventBytes, def.MaxEventBytes},
		{"max_diagnostics_per_workflow", &m.MaxDiagnosticsPerWorkflow, def.MaxDiagnosticsPerWorkflow},
		{"max_consecutive_failures", &m.MaxConsecutiveFailures, def.MaxConsecutiveFailures},
	}
	for _, n := range ints {
		if *n.v == 0 {
			*n.v = n.def
		}
		if *n.v < 1 {
			errs = append(errs, &FieldError{Field: "monitor." + n.name, Value: fmt.Sprint(*n.v),
				Accepted: "a positive number", Reason: "out of range"})
		}
	}
	switch m.Stop {
	case "":
		m.Stop = def.Stop
	case "hibernate", "destroy":
	default:
		errs = append(errs, &FieldError{Field: "monitor.stop", Value: m.Stop, Accepted: `"hibernate" or "destroy"`, Reason: "unknown stop mode"})
	}
	for i, a := range m.DiagnosticCommand {
		if a == "" && i == 0 {
			errs = append(errs, &FieldError{Field: "monitor.diagnostic_command", Reason: "the program (first element) is empty", Accepted: `an argv, e.g. ["/bin/sh", "/app/diagnose.sh"]`})
		}
	}
	return errs
}
