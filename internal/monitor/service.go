package monitor

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Store is the part of the store the monitor needs.
type Store interface {
	store.MonitorStore
	AppendAudit(ctx context.Context, r *store.AuditRecord) error
}

// Sandboxes is the part of the sandbox manager the monitor needs
// (*sandbox.Manager implements it).
type Sandboxes interface {
	Create(ctx context.Context, p sandbox.CreateParams) (*sandbox.Info, error)
	Get(ctx context.Context, tenantID, id string) (*sandbox.Info, error)
	StartProcess(ctx context.Context, tenantID, id string, req guest.ExecRequest) (*guest.ProcessInfo, error)
	ListProcesses(ctx context.Context, tenantID, id string) ([]guest.ProcessInfo, error)
	ProcessOutput(ctx context.Context, tenantID, id string, req guest.OutputRequest) (*guest.OutputChunk, error)
	ReadFileMax(ctx context.Context, tenantID, id, path string, max int64) ([]byte, error)
	WriteFile(ctx context.Context, tenantID, id, path string, data []byte, mode uint32) error
	Client(ctx context.Context, tenantID, id string, fn func(c *guest.Client) error) error
	Hibernate(ctx context.Context, tenantID, id string) (*sandbox.Info, error)
	Destroy(ctx context.Context, tenantID, id string) (*sandbox.Info, error)
}

// Workspaces snapshots a sandbox's workspace and seeds a new sandbox with
// it (wsnap.Sandboxes): a diagnostic works on a clone of the workflow's
// workspace.
type Workspaces interface {
	Snapshot(ctx context.Context, tenantID, sandboxID string) (string, error)
	Seeder(snapshot string) func(ctx context.Context, workspace string) error
}

// Stop modes of a terminated sandbox.
const (
	StopHibernate = "hibernate"
	StopDestroy   = "destroy"
)

// Config configures the Service.
type Config struct {
	Store     Store
	Sandboxes Sandboxes
	// Workspaces, when set, gives each diagnostic a clone of the workspace
	// of its workflow's latest task (seed 001's clone_ready safeguard
	// waits until that sandbox is stopped). Nil: diagnostics start empty.
	Workspaces Workspaces
	Clock      clock.Clock
	Log        *slog.Logger

	Thresholds    Thresholds
	CheckInterval time.Duration
	// Stop is StopHibernate (default) or StopDestroy.
	Stop string
	// Node names this node in termination records (default: hostname).
	Node string
	// EventSkew is how far in the future an event's timestamp may be.
	EventSkew time.Duration
	// MaxEventBytes bounds one event's data.
	MaxEventBytes int

	Diagnostics DiagnosticConfig

	// PullWait bounds one long-poll of a guest's events, and so how soon an
	// agent's exit is noticed (default 10 s).
	PullWait time.Duration
	// NoPumps leaves relaying guest events to the caller (tests that post
	// events through Ingest only).
	NoPumps bool
	// Checked receives the report of every check (a test signal).
	Checked chan<- CheckReport
	// Failpoint, when set, is called at named points (crash tests hang the
	// process there; FailAfterTerminationClaim).
	Failpoint func(name string)
}

// Service is the monitor: task runner, event pumps, periodic checks and the
// diagnostic sweep, with the daemon's Start/Stop lifecycle.
type Service struct {
	cfg   Config
	st    Store
	sbx   Sandboxes
	clock clock.Clock
	log   *slog.Logger

	mu    sync.Mutex
	pumps map[string]*pump
	// terminating are the terminations this process carries out.
	terminating map[string]bool
	ctx         context.Context // set by Start; cancelled by Stop
	cancel      context.CancelFunc
	wg          sync.WaitGroup
	started     bool
	stopped     bool
}

// New builds a service; it does nothing until Start.
func New(cfg Config) (*Service, error) {
	if cfg.Store == nil || cfg.Sandboxes == nil {
		return nil, errors.New("monitor: needs a store and a sandbox manager")
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	def := DefaultThresholds()
	if cfg.Thresholds.Idle <= 0 {
		cfg.Thresholds.Idle = def.Idle
	}
	if cfg.Thresholds.Heartbeat <= 0 {
		cfg.Thresholds.Heartbeat = def.Heartbeat
	}
	if cfg.Thresholds.StuckRunning <= 0 {
		cfg.Thresholds.StuckRunning = def.StuckRunning
	}
	if cfg.Thresholds.PostCompletion <= 0 {
		cfg.Thresholds.PostCompletion = def.PostCompletion
	}
	if cfg.CheckInterval <= 0 {
		cfg.CheckInterval = 30 * time.Second
	}
	if cfg.Stop == "" {
		cfg.Stop = StopHibernate
	}
	if cfg.Node == "" {
		cfg.Node, _ = os.Hostname()
	}
	if cfg.PullWait <= 0 {
		cfg.PullWait = defaultPullWait
	}
	if cfg.EventSkew <= 0 {
		cfg.EventSkew = 5 * time.Second
	}
	if cfg.MaxEventBytes <= 0 {
		cfg.MaxEventBytes = guest.MaxAgentEventData
	}
	cfg.Diagnostics.defaults()
	ctx, cancel := context.WithCancel(context.Background())
	return &Service{cfg: cfg, st: cfg.Store, sbx: cfg.Sandboxes, clock: cfg.Clock, log: cfg.Log,
		pumps: map[string]*pump{}, terminating: map[string]bool{}, ctx: ctx, cancel: cancel}, nil
}

// Thresholds returns the configured constants.
func (s *Service) Thresholds() Thresholds { return s.cfg.Thresholds }

// Start runs the check loop and the diagnostic sweep loop.
func (s *Service) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.started || s.stopped {
		return nil
	}
	s.started = true
	s.wg.Add(2)
	first := true
	go s.loop(s.cfg.CheckInterval, func() {
		// Terminations an earlier boot of this node claimed and did not
		// finish first, then every check takes over stale ones of any node.
		s.ResumeTerminations(s.ctx, first)
		first = false
		s.CheckOnce(s.ctx)
	})
	go s.loop(s.cfg.Diagnostics.Interval, func() { s.SweepDiagnostics(s.ctx) })
	return nil
}

func (s *Service) loop(every time.Duration, fn func()) {
	defer s.wg.Done()
	for {
		fn()
		select {
		case <-s.ctx.Done():
			return
		case <-s.clock.After(every):
		}
	}
}

// Stop ends every loop, pump and task launch and waits for them.
// Idempotent.
func (s *Service) Stop() {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
}

// goTracked runs fn in a goroutine that Stop waits for; it reports false
// once the service is stopping.
func (s *Service) goTracked(fn func(ctx context.Context)) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		fn(s.ctx)
	}()
	return true
}
