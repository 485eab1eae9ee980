package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Defaults of the lifecycle (seed 000 and SPEC §3).
const (
	DefaultSleepAfter     = 5 * time.Minute
	DefaultBackupTTL      = 7 * 24 * time.Hour
	DefaultBackgroundCap  = 30 * time.Minute
	DefaultReapInterval   = 10 * time.Second
	DefaultStopTimeout    = 10 * time.Second
	ProbeAttempts         = 10
	WarmMarkerPath        = "/tmp/.agentkernel-warm"
	touchPersistThreshold = time.Second
)

// Errors of the manager.
var (
	ErrUnknownDriver = errors.New("unknown sandbox driver")
	ErrDestroyed     = errors.New("sandbox is destroyed")
	// ErrElsewhere: the sandbox runs on another node of the cluster
	// (*ElsewhereError names it).
	ErrElsewhere = errors.New("sandbox runs on another node")
	ErrInvalid   = errors.New("invalid sandbox parameters")
	// ErrHostNetwork: a request asked for the host's network and the
	// operator does not allow it.
	ErrHostNetwork = errors.New(`field "network": "host" shares the host's network (the daemon's API on loopback included) and the operator does not allow it; set [sandbox] allow_host_network = true in agentkernel.toml to allow it`)
)

// Store is the part of the store the manager needs.
type Store interface {
	store.SandboxStore
}

// ManagerConfig configures a Manager.
type ManagerConfig struct {
	// Node is this node's id when it is one of several daemons sharing
	// the store ("" alone): its sandboxes carry it, and it recovers,
	// reaps and serves only those; another node's is ErrElsewhere.
	Node    string
	Store   Store
	Blobs   blob.Store
	Drivers map[string]Driver
	// DefaultDriver names the driver used when a sandbox asks for none.
	DefaultDriver string
	// DefaultImages is the image per driver when a sandbox names none ("" =
	// the driver's own default).
	DefaultImages map[string]string
	// DefaultNetwork is the network of a sandbox that asks for none:
	// NetworkNone unless configured.
	DefaultNetwork string
	// Egress is the egress proxy egress sandboxes reach out through; nil
	// refuses NetworkEgress.
	Egress Egress
	// AllowHostNetwork lets a create ask for NetworkHost (the operator's
	// [sandbox] allow_host_network); a DefaultNetwork of host implies it.
	AllowHostNetwork bool
	// Limits are the operator's default and maximum limits; the zero value
	// is DefaultLimitPolicy.
	Limits LimitPolicy
	// GuestBinary is the static guest binary injected into every sandbox.
	GuestBinary string
	// DataDir holds each sandbox's private directory: its host workspace
	// (DataDir/<id>/workspace, mounted into the sandbox), the guest's
	// durable records (DataDir/<id>/runtime, mounted) and its generation
	// stamp (DataDir/<id>/generation, not mounted).
	DataDir string
	// RunDir holds each sandbox's private run directory, RunDir/<id>
	// (Spec.RunDir). Keep it short: unix socket paths are limited to 107
	// bytes.
	RunDir string

	DefaultSleepAfter time.Duration
	BackupTTL         time.Duration
	BackgroundCap     time.Duration
	ReapInterval      time.Duration
	StopTimeout       time.Duration
	// MarkerTTL is how long a successful warm-marker probe is trusted while
	// calls keep succeeding (default 1s; negative = probe on every call).
	MarkerTTL time.Duration

	Clock    clock.Clock
	Log      *slog.Logger
	Registry prometheus.Registerer
	// BlobPins keeps the blob GC off a backup's blob from before it is
	// written until its row is recorded (nil when no GC runs).
	BlobPins blob.Pinner
	// Reaped, when set, receives a report of every reaper pass (a test
	// signal).
	Reaped chan<- ReapReport
	// WarmPool is how many pooled sandboxes wait per shape (driver, image,
	// limits, network) for drivers that can pool (Pooler: the process
	// driver); 0 disables the pool. See pool.go.
	WarmPool int
	// faults injects failures in tests (nil in production).
	Faults *Faults
}

// Faults lets tests fail the lifecycle at chosen points.
type Faults struct {
	// BeforeSnapshotVerify runs after the snapshot blob was written and
	// before it is verified.
	BeforeSnapshotVerify func(sandboxID string) error
	// BeforeStop runs after the backup is recorded, before the driver stops.
	BeforeStop func(sandboxID string) error
	// PoolAssign runs at each step of an assignment from the warm pool
	// ("journal", "workspace", "runtime", "rundir", "adopted", "assigned");
	// a non-nil error stops the assignment there as if the daemon had died:
	// nothing is cleaned up or undone, and the wake returns the error.
	PoolAssign func(sandboxID, step string) error
}

// Manager runs the sandbox lifecycle: create, lazy warm-up on every call,
// idle hibernation with verified snapshots, wake with restore, destroy, and
// recovery after a daemon restart.
type Manager struct {
	cfg     ManagerConfig
	log     *slog.Logger
	clock   clock.Clock
	metrics *metrics

	mu      sync.Mutex
	entries map[string]*entry
	hooks   []Hooks

	reaper reaperLoop
	pool   warmPool
}

// entry is this node's in-memory companion of a sandbox: the lifecycle lock
// and the guest client. Calls hold mu for reading; transitions (warm-up,
// hibernate, destroy) hold it for writing, so a hibernation never races a
// call.
type entry struct {
	mu     sync.RWMutex
	client *guest.Client
	// dial reaches the instance's guest socket (the driver's Dial); secret
	// is the instance's, telling one instance from the next.
	dial     guest.Dialer
	secret   []byte
	inflight atomic.Int64
	// lastTouch is the last LastActivityAt persisted (unix nanos).
	lastTouch atomic.Int64
	// tenant caches the sandbox's (immutable) tenant id.
	tenant atomic.Value
	// activeGen is non-zero while this node knows the sandbox is active at
	// that generation (see call).
	activeGen atomic.Int64
	// probedAt/probedGen cache the last successful marker probe.
	probedAt  atomic.Int64
	probedGen atomic.Int64
	// egress is the listener the proxy serves for this sandbox while its
	// instance runs (NetworkEgress only).
	egress net.Listener
	// pooled: the instance was just assigned from the warm pool (warmUp
	// skips the probe and the marker read: its /tmp is new), its workspace
	// stamped with poolGen, the generation it warms to; poolKey and
	// poolTrash are for the refill once the wake is done (refillAfter).
	pooled     bool
	poolGen    int64
	poolKey    poolKey
	poolTrash  string
	poolOldRun string
}

// NewManager builds a manager. It does not recover or reap until Recover
// and Start are called.
func NewManager(cfg ManagerConfig) (*Manager, error) {
	if cfg.Store == nil || cfg.Blobs == nil || len(cfg.Drivers) == 0 {
		return nil, errors.New("sandbox: manager needs a store, a blob store and at least one driver")
	}
	if cfg.DefaultDriver == "" {
		cfg.DefaultDriver = "process"
	}
	if cfg.DefaultSleepAfter <= 0 {
		cfg.DefaultSleepAfter = DefaultSleepAfter
	}
	if cfg.BackupTTL <= 0 {
		cfg.BackupTTL = DefaultBackupTTL
	}
	if cfg.BackgroundCap <= 0 {
		cfg.BackgroundCap = DefaultBackgroundCap
	}
	if cfg.ReapInterval <= 0 {
		cfg.ReapInterval = DefaultReapInterval
	}
	switch {
	case cfg.MarkerTTL == 0:
		cfg.MarkerTTL = time.Second
	case cfg.MarkerTTL < 0:
		cfg.MarkerTTL = 0
	}
	if cfg.StopTimeout <= 0 {
		cfg.StopTimeout = DefaultStopTimeout
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.Limits == (LimitPolicy{}) {
		cfg.Limits = DefaultLimitPolicy()
	}
	if errs := cfg.Limits.Check(); len(errs) > 0 {
		return nil, fmt.Errorf("sandbox: limit policy: %w", errs[0])
	}
	for _, d := range []struct{ name, dir string }{{"data dir", cfg.DataDir}, {"run dir (sandbox.run_dir)", cfg.RunDir}} {
		if d.dir == "" {
			return nil, errors.New("sandbox: manager needs DataDir and RunDir")
		}
		// Sockets, logs and stamps under these are trusted: nobody else may
		// be able to put anything there.
		if err := PrivateDir(d.dir); err != nil {
			return nil, fmt.Errorf("sandbox %s: %w", d.name, err)
		}
	}
	if cfg.WarmPool < 0 {
		return nil, fmt.Errorf("sandbox: warm_pool = %d: want 0 (off) or more", cfg.WarmPool)
	}
	if cfg.WarmPool > 0 {
		pools := false
		for _, d := range cfg.Drivers {
			_, ok := d.(Pooler)
			pools = pools || ok
		}
		if !pools {
			return nil, fmt.Errorf("sandbox: warm_pool = %d, but no configured driver (%s) can pool sandboxes (only the process driver can): set warm_pool = 0", cfg.WarmPool, driverList(cfg.Drivers))
		}
	}
	m := &Manager{cfg: cfg, log: cfg.Log, clock: cfg.Clock, entries: map[string]*entry{}}
	m.pool.size, m.pool.shapes = cfg.WarmPool, map[poolKey]*shapePool{}
	m.metrics = newMetrics(cfg.Registry, m)
	return m, nil
}

// Info is a sandbox with its derived state.
type Info struct {
	*store.Sandbox
	State State
	// EffectiveLimits are the limits the sandbox runs with (the record's,
	// with today's defaults for any it lacks).
	EffectiveLimits Limits
}

func (m *Manager) info(sb *store.Sandbox) *Info {
	return &Info{Sandbox: sb, State: Derive(sb), EffectiveLimits: m.limitsOf(sb)}
}

// CreateParams creates a sandbox.
type CreateParams struct {
	TenantID string
	Driver   string
	Image    string
	Network  string
	// Limits asked for; nil fields take the policy's defaults.
	Limits      LimitsRequest
	SleepAfter  time.Duration
	Metadata    map[string]string
	Environment string
	SessionKey  string
	// Cold leaves the sandbox cold instead of warming it at once.
	Cold bool
	// Seed, when set, fills the new sandbox's empty workspace (a host
	// directory no sandbox has seen yet) before its first start.
	Seed func(ctx context.Context, workspace string) error
}

// HostNetworkAllowed says whether a sandbox may share the host's network.
func (m *Manager) HostNetworkAllowed() bool {
	return m.cfg.AllowHostNetwork || m.cfg.DefaultNetwork == NetworkHost
}

// Resolve fills p's defaults and checks it as Create would, recording
// nothing: callers that create a sandbox later (an agent task's launch)
// refuse a bad request at once with the same errors. It returns the
// limits in force.
func (m *Manager) Resolve(ctx context.Context, p *CreateParams) (Limits, error) {
	if p.Driver == "" {
		p.Driver = m.cfg.DefaultDriver
	}
	d, ok := m.cfg.Drivers[p.Driver]
	if !ok {
		return Limits{}, fmt.Errorf("%w %q (configured: %s)", ErrUnknownDriver, p.Driver, m.driverNames())
	}
	if p.Image == "" {
		p.Image = m.cfg.DefaultImages[p.Driver]
	}
	if p.Network == "" {
		p.Network = m.cfg.DefaultNetwork
	}
	switch p.Network {
	case "":
		p.Network = NetworkNone
	case NetworkNone:
	case NetworkEgress:
		if m.cfg.Egress == nil {
			return Limits{}, fmt.Errorf("%w: field \"network\": %q reaches out through the egress proxy, and this daemon runs none ([sandbox] network = %q allows no outbound traffic)", ErrInvalid, NetworkEgress, m.cfg.DefaultNetwork)
		}
	case NetworkHost:
		if !m.HostNetworkAllowed() {
			return Limits{}, fmt.Errorf("%w: %w", ErrInvalid, ErrHostNetwork)
		}
	default:
		return Limits{}, fmt.Errorf("%w: network %q (accepted: %q, %q or %q)", ErrInvalid, p.Network, NetworkNone, NetworkEgress, NetworkHost)
	}
	// Before anything is recorded: a limit the guest cannot start under is
	// a 400 now, not a sandbox stuck in warming until the probe gives up.
	limits, err := m.ResolveLimits(p.Limits)
	if err != nil {
		return Limits{}, err
	}
	if p.SleepAfter == 0 {
		p.SleepAfter = m.cfg.DefaultSleepAfter
	}
	if p.SleepAfter < time.Second {
		return Limits{}, fmt.Errorf("%w: sleep_after %s is below the minimum of 1s", ErrInvalid, p.SleepAfter)
	}
	if ic, ok := d.(ImageChecker); ok {
		if err := ic.CheckImage(ctx, p.Image); err != nil {
			return Limits{}, err
		}
	}
	return limits, nil
}

// Create records a sandbox and (unless Cold) warms it so the first call is
// fast.
func (m *Manager) Create(ctx context.Context, p CreateParams) (*Info, error) {
	limits, err := m.Resolve(ctx, &p)
	if err != nil {
		return nil, err
	}
	id := ids.New("sbx")
	if p.SessionKey == "" {
		p.SessionKey = id
	}
	rawLimits, _ := json.Marshal(limits)
	now := m.clock.Now()
	sb, err := m.cfg.Store.CreateSandbox(ctx, &store.Sandbox{
		ID: id, TenantID: p.TenantID, Driver: p.Driver, Image: p.Image, Network: p.Network,
		Limits: rawLimits, SleepAfter: p.SleepAfter, Metadata: p.Metadata,
		Environment: p.Environment, SessionKey: p.SessionKey, LastActivityAt: now, Node: m.cfg.Node,
	})
	if err != nil {
		return nil, err
	}
	if err := os.Mkdir(m.sandboxDir(id), 0o700); err != nil {
		return nil, err
	}
	if err := os.Mkdir(m.workspaceDir(id), 0o755); err != nil {
		return nil, err
	}
	if err := os.Mkdir(m.runtimeDir(id), 0o755); err != nil {
		return nil, err
	}
	if p.Seed != nil {
		if sb, err = m.seed(ctx, sb, p.Seed); err != nil {
			return nil, err
		}
	}
	m.log.InfoContext(ctx, "sandbox created", "sandbox", id, "driver", p.Driver, "tenant", p.TenantID,
		"memory_mb", limits.MemoryMB, "pids", limits.Pids, "cpus", limits.CPUs)
	if p.Cold {
		return m.info(sb), nil
	}
	e := m.entry(id)
	e.mu.Lock()
	err = m.wake(ctx, e, id)
	e.mu.Unlock()
	if err != nil {
		return nil, err
	}
	return m.Get(ctx, p.TenantID, id)
}

// ResolveLimits gives a request its effective limits under the operator's
// policy, or a *LimitError naming the field and the bound it breaks.
func (m *Manager) ResolveLimits(r LimitsRequest) (Limits, error) {
	return m.cfg.Limits.Resolve(r)
}

// limitsOf reads a record's limits. A record from before limits were
// applied by default lacks some: it gets today's defaults for those.
func (m *Manager) limitsOf(sb *store.Sandbox) Limits {
	var l Limits
	_ = json.Unmarshal(sb.Limits, &l)
	d := m.cfg.Limits.Default
	if l.MemoryMB <= 0 {
		l.MemoryMB = d.MemoryMB
	}
	if l.Pids <= 0 {
		l.Pids = d.Pids
	}
	if l.CPUs <= 0 {
		l.CPUs = d.CPUs
	}
	return l
}

// Get returns a tenant's sandbox; another tenant's id is ErrNotFound.
func (m *Manager) Get(ctx context.Context, tenantID, id string) (*Info, error) {
	sb, err := m.load(ctx, tenantID, id)
	if err != nil {
		return nil, err
	}
	return m.info(sb), nil
}

// List returns a tenant's sandboxes, optionally only those in state.
func (m *Manager) List(ctx context.Context, tenantID string, state State) ([]*Info, error) {
	sbs, err := m.cfg.Store.ListSandboxes(ctx, store.ListSandboxesParams{TenantID: tenantID, IncludeDestroyed: state == StateDestroyed})
	if err != nil {
		return nil, err
	}
	out := make([]*Info, 0, len(sbs))
	for _, sb := range sbs {
		in := m.info(sb)
		if state == "" || in.State == state {
			out = append(out, in)
		}
	}
	return out, nil
}

// ListHere returns every tenant's sandboxes of this node that are not
// destroyed, cold ones included.
func (m *Manager) ListHere(ctx context.Context) ([]*Info, error) {
	sbs, err := m.cfg.Store.ListSandboxes(ctx, store.ListSandboxesParams{Node: m.cfg.Node})
	if err != nil {
		return nil, err
	}
	out := make([]*Info, 0, len(sbs))
	for _, sb := range sbs {
		if in := m.info(sb); in.State != StateDestroyed {
			out = append(out, in)
		}
	}
	return out, nil
}

// ListRunning returns every tenant's sandboxes whose instance may run (a
// driver handle or a stop in progress), without reading the cold ones.
func (m *Manager) ListRunning(ctx context.Context) ([]*Info, error) {
	sbs, err := m.cfg.Store.ListSandboxes(ctx, store.ListSandboxesParams{Running: true, Node: m.cfg.Node})
	if err != nil {
		return nil, err
	}
	out := make([]*Info, 0, len(sbs))
	for _, sb := range sbs {
		if in := m.info(sb); in.State != StateDestroyed && in.State != StateCold {
			out = append(out, in)
		}
	}
	return out, nil
}

// Backups lists a sandbox's backups, newest first.
func (m *Manager) Backups(ctx context.Context, tenantID, id string) ([]*store.Backup, error) {
	if _, err := m.load(ctx, tenantID, id); err != nil {
		return nil, err
	}
	return m.cfg.Store.ListBackups(ctx, id)
}

// Transitions returns the sandbox's state history, oldest first: a store
// read, so any node answers it, wherever the sandbox runs.
func (m *Manager) Transitions(ctx context.Context, tenantID, id string) ([]store.SandboxTransition, error) {
	sb, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if tenantID != "" && sb.TenantID != tenantID {
		return nil, fmt.Errorf("sandbox %s: %w", id, store.ErrNotFound)
	}
	return m.cfg.Store.ListSandboxTransitions(ctx, id)
}

func (m *Manager) load(ctx context.Context, tenantID, id string) (*store.Sandbox, error) {
	sb, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return nil, err
	}
	if tenantID != "" && sb.TenantID != tenantID {
		return nil, fmt.Errorf("sandbox %s: %w", id, store.ErrNotFound)
	}
	if err := m.here(sb); err != nil {
		return nil, err
	}
	return sb, nil
}

// ElsewhereError is ErrElsewhere with the node that runs the sandbox.
type ElsewhereError struct{ ID, Node string }

func (e *ElsewhereError) Error() string {
	return fmt.Sprintf("sandbox %s runs on node %s", e.ID, e.Node)
}

func (e *ElsewhereError) Unwrap() error { return ErrElsewhere }

// Here says whether the sandbox runs on this node: nil when it does (or
// there is no such sandbox, or this daemon is alone), an *ElsewhereError
// when another node's driver runs it.
func (m *Manager) Here(ctx context.Context, tenantID, id string) error {
	if m.cfg.Node == "" {
		return nil
	}
	sb, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil || (tenantID != "" && sb.TenantID != tenantID) {
		return nil
	}
	return m.here(sb)
}

// here refuses a sandbox another node runs: only its node's driver can
// reach its instance.
func (m *Manager) here(sb *store.Sandbox) error {
	if m.cfg.Node != "" && sb.Node != "" && sb.Node != m.cfg.Node {
		return &ElsewhereError{ID: sb.ID, Node: sb.Node}
	}
	return nil
}

// seed fills a new sandbox's workspace. The seed is the workspace from
// now on: a backup an earlier sandbox of the same session left (a rewound
// session's, say) is older than it and never restored over it, so the
// sandbox starts at that backup's generation.
func (m *Manager) seed(ctx context.Context, sb *store.Sandbox, fill func(context.Context, string) error) (*store.Sandbox, error) {
	if err := fill(ctx, m.workspaceDir(sb.ID)); err != nil {
		return nil, fmt.Errorf("sandbox %s: seed its workspace: %w", sb.ID, err)
	}
	b, err := m.cfg.Store.LatestBackup(ctx, backupKey(sb), m.clock.Now())
	if errors.Is(err, store.ErrNotFound) {
		return sb, nil
	}
	if err != nil {
		return nil, err
	}
	if err := m.writeStamp(sb.ID, b.Generation); err != nil {
		return nil, err
	}
	sb.Generation = b.Generation
	return m.cfg.Store.UpdateSandbox(ctx, sb)
}

// WithWorkspace calls fn with the host directory of a tenant's sandbox's
// workspace, while no hibernation, restore or destroy of that sandbox can
// run. The directory is the sandbox's to write: fn must read it as hostile
// (package beneath).
func (m *Manager) WithWorkspace(ctx context.Context, tenantID, id string, fn func(dir string) error) error {
	if _, err := m.load(ctx, tenantID, id); err != nil {
		return err
	}
	e := m.entry(id)
	e.mu.Lock()
	defer e.mu.Unlock()
	sb, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return err
	}
	if Derive(sb) == StateDestroyed {
		return fmt.Errorf("sandbox %s is destroyed: %w", id, store.ErrNotFound)
	}
	return fn(m.workspaceDir(id))
}

func (m *Manager) entry(id string) *entry {
	m.mu.Lock()
	defer m.mu.Unlock()
	e, ok := m.entries[id]
	if !ok {
		e = &entry{}
		m.entries[id] = e
	}
	return e
}

func (m *Manager) driverNames() string { return driverList(m.cfg.Drivers) }

func driverList(drivers map[string]Driver) string {
	var s string
	for n := range drivers {
		if s != "" {
			s += ", "
		}
		s += fmt.Sprintf("%q", n)
	}
	return s
}

func (m *Manager) workspaceDir(id string) string {
	return filepath.Join(m.cfg.DataDir, id, "workspace")
}
func (m *Manager) runDir(id string) string { return filepath.Join(m.cfg.RunDir, id) }

// runtimeDir holds the guest's durable records (Spec.RuntimeDir): backed
// up and restored with the workspace, beside it rather than inside it.
func (m *Manager) runtimeDir(id string) string {
	return filepath.Join(m.cfg.DataDir, id, "runtime")
}

// WorkspaceDir is the host directory of a sandbox's /workspace (tests,
// benchmarks).
func (m *Manager) WorkspaceDir(id string) string { return m.workspaceDir(id) }
