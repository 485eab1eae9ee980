package object

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/cluster"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// MaxArgsBytes bounds a call's args (seed 002: 1 MB, like a stored value).
const MaxArgsBytes = 1 << 20

// sandboxSleepAfter keeps the sandbox layer's own idle reaper away from
// object sandboxes: the runtime hibernates them itself, after dumping their
// storage, which the sandbox reaper cannot do.
const sandboxSleepAfter = 100 * 365 * 24 * time.Hour

// Config configures a Runtime.
type Config struct {
	Store     store.ObjectStore
	Sandboxes *sandbox.Manager
	// Classes are the [[objects]] of agentkernel.toml, available to every
	// tenant.
	Classes []config.ObjectClassConfig
	// Limits are [durable_objects]; zero fields take seed 002's values.
	// Its AppRoots bound the classes' app_dir.
	Limits config.DurableObjectsConfig
	// PrivatePaths are the daemon's own files and directories (home, state,
	// blobs, run dir): no app_dir may overlap them.
	PrivatePaths []string
	// Blobs stores the tenants' bundles and BundleDir, a daemon-private
	// directory no sandbox can write, holds them unpacked. Without them
	// bundles cannot be uploaded.
	Blobs     blob.Store
	BundleDir string
	// BlobPins keeps the blob GC off a bundle's blob from before its Put
	// until the row naming it is committed (the collector; nil without one).
	BlobPins blob.Pinner

	// Cluster is this node when several daemons share the store (nil
	// alone): objects are served where their lease is (cluster.go).
	Cluster *cluster.Node

	Clock    clock.Clock
	Log      *slog.Logger
	Registry prometheus.Registerer

	// Test signals (nil in production).
	// Swept receives a report after every idle pass.
	Swept chan<- SweepReport
	// AlarmDone receives a report after every alarm attempt.
	AlarmDone chan<- AlarmReport
	// Failpoint, when set, is called at the named points of alarm delivery
	// (crash tests hang the daemon there to SIGKILL it).
	Failpoint func(name string)
}

// Runtime runs durable objects.
type Runtime struct {
	cfg     Config
	st      store.ObjectStore
	sbx     *sandbox.Manager
	lim     config.DurableObjectsConfig
	clock   clock.Clock
	log     *slog.Logger
	metrics *metrics

	configClasses map[string]*Class
	appRoots      *appRoots
	bundles       *bundleStore
	// appMounts holds, per sandbox started on this node, what its /app
	// came from (see hooks).
	appMounts  sync.Map
	classMu    sync.RWMutex
	classCache map[classKey]*Class

	mu     sync.Mutex
	actors map[store.ObjectKey]*actor
	// active counts the sandboxes of objects running on this node (the
	// max_active_objects budget): an Active object of an object-mode class
	// counts 1, and so does a running shared sandbox of a class-mode class
	// whatever its number of objects.
	active int
	// pools holds the shared sandboxes of class-mode classes (shared.go).
	pools sharedPools

	commits *committer

	svc   sync.Mutex
	loops []*loop
	// fired tracks alarms being fired (and retried) right now.
	firing   sync.Map
	alarmsWG sync.WaitGroup
	ctx      context.Context
	cancel   context.CancelFunc
}

// New builds a runtime and registers its sandbox hooks. Start runs its
// background loops.
func New(cfg Config) (*Runtime, error) {
	if cfg.Store == nil || cfg.Sandboxes == nil {
		return nil, errors.New("object: runtime needs a store and a sandbox manager")
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
	cfg.Limits = withDefaults(cfg.Limits)
	r := &Runtime{
		cfg: cfg, st: cfg.Store, sbx: cfg.Sandboxes, lim: cfg.Limits, clock: cfg.Clock, log: cfg.Log,
		metrics:       newMetrics(cfg.Registry),
		configClasses: map[string]*Class{},
		classCache:    map[classKey]*Class{},
		actors:        map[store.ObjectKey]*actor{},
		pools:         newSharedPools(),
	}
	if err := r.loadConfigClasses(cfg.Classes); err != nil {
		return nil, err
	}
	if cfg.Blobs != nil && cfg.BundleDir != "" {
		b, err := newBundleStore(cfg.Store, cfg.Blobs, cfg.BlobPins, cfg.BundleDir, bundleLimits{
			bytes: cfg.Limits.MaxBundleBytes, unpackedBytes: cfg.Limits.MaxBundleUnpackedBytes, files: cfg.Limits.MaxBundleFiles,
		}, cfg.Log)
		if err != nil {
			return nil, err
		}
		r.bundles = b
	}
	r.commits = newCommitter(cfg.Store, cfg.Log)
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.sbx.AddHooks(r.hooks())
	return r, nil
}

func withDefaults(l config.DurableObjectsConfig) config.DurableObjectsConfig {
	d := config.DefaultDurableObjects()
	if l.AlarmPollInterval <= 0 {
		l.AlarmPollInterval = d.AlarmPollInterval
	}
	if l.IdleCheckInterval <= 0 {
		l.IdleCheckInterval = d.IdleCheckInterval
	}
	if l.MaxKeys <= 0 {
		l.MaxKeys = d.MaxKeys
	}
	if l.MaxValueBytes <= 0 {
		l.MaxValueBytes = d.MaxValueBytes
	}
	if l.MaxStorageBytes <= 0 {
		l.MaxStorageBytes = d.MaxStorageBytes
	}
	if l.MaxActiveObjects <= 0 {
		l.MaxActiveObjects = d.MaxActiveObjects
	}
	if l.MaxAlarms <= 0 {
		l.MaxAlarms = d.MaxAlarms
	}
	if l.CallTimeout <= 0 {
		l.CallTimeout = d.CallTimeout
	}
	if l.DumpTimeout <= 0 {
		l.DumpTimeout = d.DumpTimeout
	}
	if l.MaxBundleBytes <= 0 {
		l.MaxBundleBytes = d.MaxBundleBytes
	}
	if l.MaxBundleUnpackedBytes <= 0 {
		l.MaxBundleUnpackedBytes = d.MaxBundleUnpackedBytes
	}
	if l.MaxBundleFiles <= 0 {
		l.MaxBundleFiles = d.MaxBundleFiles
	}
	return l
}

// Start loads the objects left Active by an earlier run, then starts the
// group committer, the idle loop and the alarm poller. It returns once they
// run.
func (r *Runtime) Start(ctx context.Context) error {
	r.svc.Lock()
	defer r.svc.Unlock()
	if r.loops != nil {
		return nil
	}
	if err := r.loadActive(ctx); err != nil {
		return err
	}
	r.tidyBundles(ctx)
	r.commits.start()
	r.loops = []*loop{
		startLoop(r.clock, r.lim.IdleCheckInterval.D(), false, r.idlePass),
		startLoop(r.clock, r.lim.AlarmPollInterval.D(), true, r.alarmPass),
	}
	return nil
}

// Stop stops the loops, waits for alarms being fired and the committer;
// idempotent. Objects keep running in their sandboxes.
func (r *Runtime) Stop() {
	r.svc.Lock()
	loops := r.loops
	r.loops = []*loop{}
	r.svc.Unlock()
	for _, l := range loops {
		l.stop()
	}
	r.cancel()
	r.alarmsWG.Wait()
	r.commits.stop()
}

// loadActive counts the objects Active in the store toward the
// max_active_objects budget and hands them to the idle loop, and learns
// the shared sandboxes that still run.
func (r *Runtime) loadActive(ctx context.Context) error {
	objs, err := listAll(ctx, r.st, store.ListObjectsParams{Status: store.ObjectActive})
	if err != nil {
		return err
	}
	now := r.clock.Now()
	for _, o := range objs {
		if !r.mine(ctx, o) {
			continue
		}
		cls, err := r.Class(ctx, o.TenantID, o.Class)
		if err != nil {
			cls = classFromDef(ClassDef{Class: o.Class, InitCommand: []string{"?"}}, false)
		}
		a := r.actor(o.ObjectKey, cls)
		a.life.Lock()
		err = nil
		if a.state == stateUnknown {
			err = r.adopt(ctx, a, o)
		}
		a.life.Unlock()
		if err != nil {
			return err
		}
		if o.LastCallAt == nil {
			a.lastCall.Store(now.UnixNano())
		}
	}
	// Shared sandboxes still running without a live object (the daemon
	// died between the last one's hibernation and the stop): counted, and
	// stopped by the idle pass.
	running, err := r.sbx.ListRunning(ctx)
	if err != nil {
		return err
	}
	for _, in := range running {
		if _, _, ok := sharedMeta(in.Sandbox); ok {
			if _, err := r.sharedOf(ctx, in.TenantID, in.ID); err != nil {
				return err
			}
		} else if key, ok := objectOf(in.Sandbox); ok && r.cfg.Cluster != nil {
			r.dropStray(ctx, key, in.ID)
		}
	}
	return nil
}

// dropStray destroys a running sandbox of this node that its object no
// longer names: another node took the object over while this one was
// down, and serves it from a sandbox of its own.
func (r *Runtime) dropStray(ctx context.Context, key store.ObjectKey, sandboxID string) {
	o, err := r.st.GetObject(ctx, key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return
	}
	if o != nil && o.SandboxID == sandboxID {
		return
	}
	r.log.InfoContext(ctx, "object: its sandbox here is no longer its own (another node took it over); destroyed", "object", subject(key), "sandbox", sandboxID)
	r.destroySandbox(ctx, key.TenantID, sandboxID)
}

// mine says, at start, whether an Active object is this node's to adopt:
// always alone; in a cluster, when this node still holds its lease. An
// object another node took over while this one was down or cut off has
// its sandbox here destroyed (the new owner serves it from the store).
func (r *Runtime) mine(ctx context.Context, o *store.Object) bool {
	if r.cfg.Cluster == nil {
		return true
	}
	if r.cfg.Cluster.Owns(store.ObjectResource(o.ObjectKey)) {
		return true
	}
	in, err := r.sbx.Get(ctx, o.TenantID, o.SandboxID)
	if err == nil && in.State != sandbox.StateDestroyed {
		if _, _, shared := sharedMeta(in.Sandbox); !shared {
			r.destroySandbox(ctx, o.TenantID, o.SandboxID)
		}
	}
	return false
}

func listAll(ctx context.Context, st store.ObjectStore, p store.ListObjectsParams) ([]*store.Object, error) {
	var out []*store.Object
	p.Limit = 500
	for {
		page, err := st.ListObjects(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, page...)
		if len(page) < p.Limit {
			return out, nil
		}
		last := page[len(page)-1]
		p.AfterID = last.Class + "/" + last.ID
	}
}
