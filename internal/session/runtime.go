package session

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// Appender persists events and publishes them to live subscribers
// (*EventLog). Publish hands live subscribers events a larger store
// transaction (a step's or a turn's end) has already made durable.
type Appender interface {
	Append(ctx context.Context, sessionID string, evs []store.NewEvent) ([]store.SessionEvent, error)
	Publish(sessionID string, evs []store.SessionEvent)
}

// Models resolves a model id to its provider (*model.Registry).
type Models interface {
	Resolve(modelID string) (*model.Resolved, error)
}

// Sandboxes is the part of the sandbox manager the runtime uses.
type Sandboxes interface {
	Create(ctx context.Context, p sandbox.CreateParams) (*sandbox.Info, error)
	Client(ctx context.Context, tenantID, id string, fn func(c *guest.Client) error) error
	Destroy(ctx context.Context, tenantID, id string) (*sandbox.Info, error)
	// Here is nil unless another node of the cluster runs the sandbox
	// (sandbox.ErrElsewhere).
	Here(ctx context.Context, tenantID, id string) error
	// ListHere lists this node's sandboxes that are not destroyed.
	ListHere(ctx context.Context) ([]*sandbox.Info, error)
}

// PackageLayers gives an environment's package layer (*packages.Layers).
type PackageLayers interface {
	// Layer waits for the layer of env's config.packages for sandboxes of
	// driver and image and returns the metadata of a sandbox that starts
	// from it (nil when the environment has no packages).
	Layer(ctx context.Context, env *store.Environment, driver, image string) (map[string]string, error)
}

// Store is what the runtime keeps in the store: sessions, events and run
// rows, the steps and turn ends that checkpoint them (one session model),
// the interrupt flag, and the op journal, stream chunks and background
// tasks of crash-proof turns.
type Store interface {
	store.ManagedStore
	store.OpStore
	GetLatestCheckpoint(ctx context.Context, sessionID string) (*store.Checkpoint, error)
	CheckInterruptFlag(ctx context.Context, id string) (store.InterruptFlag, error)
}

// Workspaces snapshots a session's workspace at a step boundary, for the
// checkpoint that closes the step, and fills a new sandbox from a snapshot
// (fork and rewind start from one).
type Workspaces interface {
	// Snapshot stores the sandbox's workspace as it is now and returns the
	// snapshot's id.
	Snapshot(ctx context.Context, tenantID, sandboxID string) (string, error)
	// Seeder returns what fills an empty workspace with the snapshot
	// (sandbox.CreateParams.Seed).
	Seeder(snapshot string) func(ctx context.Context, workspace string) error
}

// RuntimeConfig configures a Runtime.
type RuntimeConfig struct {
	Store     Store
	Events    Appender
	Models    Models
	Sandboxes Sandboxes
	// Owner names this process in run rows: node id and boot id.
	Owner string
	// Owns, when set (several daemons share the store), says whether this
	// node owns a session (taking it when no live node does): only the
	// owner runs its turns, recovers them and wakes it for pending input.
	Owns func(sessionID string) bool
	// Holds, when set, says whether this node holds a session's lease now,
	// taking nothing (Lost checks it before it destroys a sandbox: the
	// session may have come back).
	Holds func(sessionID string) bool
	// Lease is how long a run row stays owned without renewal (default
	// 30s); the turn renews it every Lease/3.
	Lease time.Duration
	// Credentials, when set, gives the environment_variable credentials of
	// a session's vaults: their placeholders go into the environment of
	// every tool call (the egress proxy substitutes the values).
	Credentials EnvCredentials
	// ToolLimits bound each built-in tool call.
	ToolLimits tools.Limits
	// MaxSteps bounds model calls per turn (default 100).
	MaxSteps int
	// IdleWorker is how long a session's worker lingers with nothing to do
	// before it exits (default 1m).
	IdleWorker time.Duration
	// RecoverEvery is the period of the orphan sweep (default Lease/2);
	// the first sweep runs at Start.
	RecoverEvery time.Duration
	// MaxResuming bounds how many recovered turns load their session and
	// resume at once (default 512): after a restart with thousands of
	// orphans the store serves a bounded number at a time. Only the resume
	// is bounded; the turns then run concurrently (once their wave is
	// resumed, see awaitWave).
	MaxResuming int
	// MaxParkedWorkers bounds how many idle workers keep their folded
	// conversation for IdleWorker (default 1000); past it the longest
	// parked is dropped, and its session's next turn reads its log again.
	MaxParkedWorkers int
	// MaxRecoveries caps recoveries of one turn that made no progress
	// (default 5); the next one forces the session idle.
	MaxRecoveries int64
	// OutcomeHeartbeat is how often a running outcome evaluation emits
	// span.outcome_evaluation_ongoing (default 10s; one goes out as the
	// grader is asked).
	OutcomeHeartbeat time.Duration
	// BackgroundPoll is how often background tasks are polled (default 5s).
	BackgroundPoll time.Duration
	// BackgroundCap is how long a run_in_background command may run before
	// it is killed (default tools.DefaultBackgroundCap, 30m).
	BackgroundCap time.Duration
	// MCPAuth gives the bearer token of each MCP server a turn connects to
	// (the vault service); nil connects without one.
	MCPAuth MCPAuthorizer
	// MCPConnectTimeout bounds connecting to one MCP server and listing its
	// tools (default 10s); MCPCallTimeout bounds one MCP tool call
	// (default 60s).
	MCPConnectTimeout time.Duration
	MCPCallTimeout    time.Duration
	// Context are the layers that fill a session's sandbox beyond its
	// workspace and take back what a turn leaves (see ContextHook).
	Context []ContextHook
	// Workspaces, when set, snapshots the session's workspace at every step
	// boundary that ran a tool which may write; nil records no snapshot.
	Workspaces Workspaces
	// Packages, when set, gives the package layer of an environment: the
	// session's sandbox is created once it is built (the first tool call
	// waits), with the metadata it returns; a failed build fails the tool
	// call with an error that names the package.
	Packages PackageLayers
	// Work, when set, is the work queue of self_hosted environments: a
	// turn that waits for a worker's tool results makes sure the session
	// has work queued, and a destroyed session's work stops.
	Work WorkQueue
	// Failpoint, when set, is called at named points of a turn (crash
	// tests hang the process there; see failpoints.go).
	Failpoint func(name string)
	// Recovered, when set, receives the id of each session whose orphaned
	// run row this runtime claimed (a test and benchmark signal; never
	// blocks).
	Recovered chan<- string
	Clock     clock.Clock
	Log       *slog.Logger
}

// WorkQueue is the environment work queue (envwork.Queue).
type WorkQueue interface {
	EnsureSession(ctx context.Context, s *store.ManagedSession) error
	StopSession(ctx context.Context, sessionID string) error
}

// Errors of the runtime.
var (
	ErrStopped    = errors.New("session runtime stopped")
	errInterrupt  = errors.New("interrupted by user.interrupt")
	errDestroying = errors.New("session is being destroyed")
)

// Runtime runs the turns of Managed Agents sessions: one worker per
// session with work, fed by the durable queue of user events in the store
// (seed 000's SessionDO, derived status and all).
type Runtime struct {
	cfg RuntimeConfig
	log *slog.Logger

	mu          sync.Mutex
	ctx         context.Context
	cancel      context.CancelFunc
	stopped     bool
	workers     map[string]*worker
	terminating map[string]bool
	wg          sync.WaitGroup
	// resuming holds a token per recovered turn being resumed
	// (MaxResuming).
	resuming chan struct{}
	// pendingResumes counts rows the sweep handed over whose turns are
	// not resumed yet; resumed signals each one done (awaitResumes).
	pendingResumes atomic.Int64
	resumed        chan struct{}
	// wave is closed (and replaced) each time pendingResumes drops to
	// zero (awaitWave).
	waveMu sync.Mutex
	wave   chan struct{}
	// parked are the workers without a goroutine, longest parked first
	// (MaxParkedWorkers).
	parked *list.List
}

// NewRuntime validates cfg and fills defaults. Nothing runs until Start.
func NewRuntime(cfg RuntimeConfig) (*Runtime, error) {
	if cfg.Store == nil || cfg.Events == nil || cfg.Models == nil {
		return nil, errors.New("session: runtime needs a store, an event log and models")
	}
	if cfg.Owner == "" {
		return nil, errors.New("session: runtime needs an owner (node id and boot id)")
	}
	if cfg.Lease <= 0 {
		cfg.Lease = 30 * time.Second
	}
	if cfg.MaxSteps <= 0 {
		cfg.MaxSteps = 100
	}
	if cfg.IdleWorker <= 0 {
		cfg.IdleWorker = time.Minute
	}
	if cfg.RecoverEvery <= 0 {
		cfg.RecoverEvery = cfg.Lease / 2
	}
	if cfg.MaxResuming <= 0 {
		cfg.MaxResuming = 512
	}
	if cfg.MaxParkedWorkers <= 0 {
		cfg.MaxParkedWorkers = 1000
	}
	if cfg.MaxRecoveries <= 0 {
		cfg.MaxRecoveries = DefaultMaxRecoveries
	}
	if cfg.BackgroundPoll <= 0 {
		cfg.BackgroundPoll = 5 * time.Second
	}
	if cfg.OutcomeHeartbeat <= 0 {
		cfg.OutcomeHeartbeat = 10 * time.Second
	}
	if cfg.BackgroundCap <= 0 {
		cfg.BackgroundCap = tools.DefaultBackgroundCap
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Runtime{cfg: cfg, log: cfg.Log, workers: map[string]*worker{}, terminating: map[string]bool{},
		resuming: make(chan struct{}, cfg.MaxResuming), resumed: make(chan struct{}, 1), parked: list.New(), wave: make(chan struct{})}, nil
}

// Start lets Wake run workers, and starts the orphan sweep (its first
// pass recovers the turns an earlier boot of this node left) and the
// background task poller. It returns at once.
func (r *Runtime) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped {
		return ErrStopped
	}
	if r.ctx != nil {
		return nil
	}
	// Before any worker of this process runs: a turn here may be about
	// to replace a moved session's sandbox.
	r.dropMovedSandboxes(ctx)
	r.ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.wg.Add(2)
	go r.sweepLoop(r.ctx)
	go r.pollLoop(r.ctx)
	return nil
}

// Stop aborts running turns and waits for every worker. An aborted turn
// keeps its run row: the next start (or another node, once the lease
// expired) recovers it, so a restart during a turn loses nothing.
// Idempotent.
func (r *Runtime) Stop() {
	r.mu.Lock()
	if r.stopped {
		r.mu.Unlock()
		return
	}
	r.stopped = true
	if r.cancel != nil {
		r.cancel()
	}
	for _, w := range r.workers {
		if w.evict != nil {
			w.evict.Stop()
		}
	}
	r.mu.Unlock()
	r.wg.Wait()
}

// Wake tells the session's worker that user events were appended. It
// never blocks; a worker is started when the session has none.
func (r *Runtime) Wake(sessionID string) {
	if !r.owns(sessionID) {
		return // its owner runs it
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.ctx == nil || r.terminating[sessionID] {
		return
	}
	w := r.workers[sessionID]
	if w == nil {
		w = newWorker(r, sessionID)
		r.workers[sessionID] = w
	}
	w.notify()
	r.startWorker(w)
}

// owns says whether this node runs the session's turns.
func (r *Runtime) owns(sessionID string) bool {
	return r.cfg.Owns == nil || r.cfg.Owns(sessionID)
}

// startWorker runs w's goroutine unless it runs. Called with r.mu held.
func (r *Runtime) startWorker(w *worker) {
	if w.running {
		return
	}
	r.unpark(w)
	w.running = true
	r.wg.Add(1)
	go w.run(r.ctx)
}

// park ends w's goroutine when no wake-up arrived since its last drain
// (Wake notifies under r.mu, so none is lost) and keeps the worker for
// IdleWorker; it reports whether the goroutine must exit. Once the runtime
// stops, the worker is removed.
func (r *Runtime) park(w *worker) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.stopped || r.ctx.Err() != nil {
		w.running = false
		r.remove(w)
		return true
	}
	if len(w.wake) > 0 {
		return false
	}
	w.running = false
	w.evict = time.AfterFunc(r.cfg.IdleWorker, func() { r.evictIdle(w) })
	w.parkedAt = r.parked.PushBack(w)
	for r.parked.Len() > r.cfg.MaxParkedWorkers {
		r.remove(r.parked.Front().Value.(*worker))
	}
	return true
}

// unpark cancels w's eviction and takes it off the parked list. Called
// with r.mu held.
func (r *Runtime) unpark(w *worker) {
	if w.evict != nil {
		w.evict.Stop()
		w.evict = nil
	}
	if w.parkedAt != nil {
		r.parked.Remove(w.parkedAt)
		w.parkedAt = nil
	}
}

// evictIdle removes a worker that stayed parked for IdleWorker.
func (r *Runtime) evictIdle(w *worker) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w.running || len(w.wake) > 0 {
		return
	}
	r.remove(w)
}

// remove drops w from the map. Called with r.mu held.
func (r *Runtime) remove(w *worker) {
	r.unpark(w)
	if r.workers[w.id] == w {
		delete(r.workers, w.id)
	}
	// A row handed over to a worker that never resumed it (its session
	// ended first) is pending no more; the row itself stays for a sweep.
	w.dropRecovery()
}

// Destroy terminates a session (seed 000's destroy sequence): a running
// turn is aborted and ends, terminated_at is set and
// session.status_terminated appended, then the sandbox takes its final
// workspace snapshot and is destroyed. Events sent afterwards are the
// API's to reject; the API deletes the record afterwards.
func (r *Runtime) Destroy(ctx context.Context, tenantID, sessionID string) error {
	s, err := r.cfg.Store.GetManagedSession(ctx, sessionID)
	if err != nil {
		return err
	}
	if s.TenantID != tenantID {
		return fmt.Errorf("session %s: %w", sessionID, store.ErrNotFound)
	}
	r.mu.Lock()
	r.terminating[sessionID] = true
	w := r.workers[sessionID]
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		delete(r.terminating, sessionID)
		r.mu.Unlock()
	}()
	if w != nil {
		w.abortTurn(errDestroying)
		w.waitTurn(ctx)
	}
	already := s.TerminatedAt != nil
	if !already {
		now := r.cfg.Clock.Now()
		s, err = r.updateSession(ctx, sessionID, func(s *store.ManagedSession) bool {
			if s.TerminatedAt != nil {
				return false
			}
			s.TerminatedAt = &now
			return true
		})
		if err != nil {
			return err
		}
		if _, err := r.cfg.Events.Append(ctx, sessionID, []store.NewEvent{newEvent(EventStatusTerminated, nil)}); err != nil {
			return err
		}
	}
	if r.cfg.Work != nil {
		// A worker serving it stops at its next heartbeat.
		if err := r.cfg.Work.StopSession(ctx, sessionID); err != nil {
			return fmt.Errorf("session %s: stop its work: %w", sessionID, err)
		}
	}
	// Its threads end with it (before the sandbox they share goes).
	threads, err := r.cfg.Store.ListSessionThreads(ctx, sessionID)
	if err != nil {
		return fmt.Errorf("session %s: its threads: %w", sessionID, err)
	}
	for _, th := range threads {
		if err := r.Destroy(ctx, tenantID, th.ID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("session %s: thread %s: %w", sessionID, th.ID, err)
		}
	}
	if s.SandboxID != "" && s.ThreadOf == "" && r.cfg.Sandboxes != nil {
		if _, err := r.cfg.Sandboxes.Destroy(ctx, tenantID, s.SandboxID); err != nil && !errors.Is(err, store.ErrNotFound) {
			return fmt.Errorf("session %s: destroy sandbox %s: %w", sessionID, s.SandboxID, err)
		}
	}
	// A rewind the daemon died in the middle of leaves the cut-off sandbox
	// with the abandoned branch.
	if branches, err := r.cfg.Store.ListBranches(ctx, sessionID); err == nil && r.cfg.Sandboxes != nil {
		for _, b := range branches {
			if b.SandboxID == "" {
				continue
			}
			if _, err := r.cfg.Sandboxes.Destroy(ctx, tenantID, b.SandboxID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return fmt.Errorf("session %s: destroy sandbox %s of branch %s: %w", sessionID, b.SandboxID, b.ID, err)
			}
		}
	}
	if s.ThreadOf != "" {
		r.threadProgress(s.ThreadOf)
	}
	r.log.InfoContext(ctx, "session terminated", "session", sessionID, "sandbox", s.SandboxID)
	return nil
}

// failpoint runs the configured failpoint hook, if any.
func (r *Runtime) failpoint(name string) {
	if r.cfg.Failpoint != nil {
		r.cfg.Failpoint(name)
	}
}

func (r *Runtime) isTerminating(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.terminating[id]
}

// updateSession applies fn to the session and writes it with the store's
// version check, re-reading on a conflict. fn returns false to write
// nothing.
func (r *Runtime) updateSession(ctx context.Context, id string, fn func(s *store.ManagedSession) bool) (*store.ManagedSession, error) {
	for attempt := 0; ; attempt++ {
		s, err := r.cfg.Store.GetManagedSession(ctx, id)
		if err != nil {
			return nil, err
		}
		if !fn(s) {
			return s, nil
		}
		out, err := r.cfg.Store.UpdateManagedSession(ctx, s)
		if errors.Is(err, store.ErrVersionMismatch) && attempt < 20 {
			continue
		}
		return out, err
	}
}
