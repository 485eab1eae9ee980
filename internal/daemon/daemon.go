// Package daemon wires `agentkernel serve`: configuration, the store, blobs,
// the HTTP server and every background service, with one graceful shutdown.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/agentkernel/agentkernel/internal/api"
	"github.com/agentkernel/agentkernel/internal/auth"
	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/blobgc"
	"github.com/agentkernel/agentkernel/internal/cluster"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/console"
	"github.com/agentkernel/agentkernel/internal/envwork"
	"github.com/agentkernel/agentkernel/internal/files"
	managedsvc "github.com/agentkernel/agentkernel/internal/managed"
	"github.com/agentkernel/agentkernel/internal/memory"
	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/packages"
	"github.com/agentkernel/agentkernel/internal/resources"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/skills"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/postgres"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
	"github.com/agentkernel/agentkernel/internal/vault"
	"github.com/agentkernel/agentkernel/internal/version"
	"github.com/agentkernel/agentkernel/internal/webhook"
	"github.com/agentkernel/agentkernel/internal/wsnap"
)

// Daemon is a running agentkernel server.
type Daemon struct {
	cfg   config.Config
	log   *slog.Logger
	store store.Store
	blobs blobStore
	// snaps stores workspace snapshots (step checkpoints, forks, rewinds).
	snaps *wsnap.Store
	// sandboxes is the sandbox lifecycle manager; closers release driver
	// clients at shutdown (sandboxes themselves keep running).
	sandboxes *sandbox.Manager
	closers   []func() error
	packages  *packages.Service
	registry  *prometheus.Registry
	server    *api.Server
	services  []Service
	// events and runner serve the Managed Agents API (nil without it).
	events *session.EventLog
	runner *runnerSlot
	// vaults keeps vault credentials (nil without Managed Agents storage).
	vaults *vault.Service
	// files serves /v1/files and stores the files sessions produce.
	files *files.Service
	// fileReaper deletes expired files.
	fileReaper *files.Reaper
	// webhooks registers webhook endpoints and delivers the outbox.
	webhooks *webhook.Service
	// memory keeps memory stores (nil without Managed Agents storage).
	memory *memory.Service
	skills *skills.Service
	// resources runs sessions' resources (nil without Managed Agents storage).
	resources *resources.Service

	// cluster is this node when several daemons share the store (nil
	// alone).
	cluster *cluster.Node

	httpServer *http.Server
	listener   net.Listener
	// lock keeps other daemons off the home until the stores are closed.
	lock *homeLock

	stopOnce sync.Once
}

// New locks the home, opens the store, bootstraps the admin key, recovers
// sandboxes and builds the server. It does not listen yet. The home lock
// comes first: nothing may be opened or recovered while another daemon
// serves the same home.
func New(ctx context.Context, cfg config.Config, log *slog.Logger) (*Daemon, error) {
	if err := sealInheritedFDs(); err != nil {
		return nil, fmt.Errorf("mark inherited file descriptors close-on-exec: %w", err)
	}
	if err := os.MkdirAll(cfg.Home, 0o700); err != nil {
		return nil, fmt.Errorf("home %s: %w", cfg.Home, err)
	}
	lock, err := lockHome(cfg.Home)
	if err != nil {
		return nil, err
	}
	d, err := build(ctx, cfg, log)
	if err != nil {
		lock.release()
		return nil, err
	}
	d.lock = lock
	return d, nil
}

// build is New under the home lock.
func build(ctx context.Context, cfg config.Config, log *slog.Logger) (*Daemon, error) {
	st, err := OpenStore(ctx, cfg)
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: log, store: st, registry: prometheus.NewRegistry()}
	d.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if _, err := auth.Bootstrap(ctx, st, cfg.AdminKeyPath(), log); err != nil {
		st.Close()
		return nil, err
	}
	blobs, err := openBlobs(ctx, cfg, log.With("component", "blob"))
	if err != nil {
		st.Close()
		return nil, err
	}
	d.blobs = blobs
	d.snaps = wsnap.New(blobs, log.With("component", "wsnap"))
	gc, err := blobgc.New(blobgc.Config{Blobs: blobs, Refs: st, Grace: cfg.Blob.GCGrace.D(),
		Interval: cfg.Blob.GCInterval.D(), Log: log.With("component", "blobgc"), Registry: d.registry,
		Delegates: []blobgc.Delegate{snapshotGC{snaps: d.snaps, st: st}}})
	if err != nil {
		d.closeStores()
		return nil, err
	}
	if _, ok := st.(store.ManagedStore); ok {
		keys, err := vault.OpenKeyring(cfg.VaultKeyFile())
		if err != nil {
			d.closeStores()
			return nil, err
		}
		d.vaults = vault.New(vault.Config{Store: st, Keys: keys, Log: log.With("component", "vault")})
		d.memory = memory.New(memory.Config{Store: st, Log: log.With("component", "memory")})
		d.skills = skills.New(skills.Config{Store: st, Blobs: blobs, Pins: gc, Log: log.With("component", "skills"),
			Limits: skills.Limits{UploadBytes: cfg.Skills.MaxUploadBytes, Files: cfg.Skills.MaxFiles,
				Bytes: cfg.Skills.MaxUnpackedBytes, Ratio: cfg.Skills.MaxExpansionRatio}})
	}
	// Environments' package layers: built in sandboxes of the manager below,
	// whose egress policy the proxy asks it for.
	pkgs, err := packages.New(packages.Config{Store: st, Dir: cfg.PackagesDir(), PipIndexURL: cfg.Packages.PipIndexURL,
		NpmRegistry: cfg.Packages.NpmRegistry, Log: log.With("component", "packages")})
	if err != nil {
		d.closeStores()
		return nil, err
	}
	proxy, audit, err := newEgress(cfg, st, d.vaults, pkgs, d.registry, log)
	if err != nil {
		d.closeStores()
		return nil, err
	}
	if audit != nil {
		// Registered first, so it stops last: sandboxes and the proxy's
		// connections end before the queue is drained.
		d.AddService(audit)
		d.closers = append(d.closers, proxy.Close)
	}
	// The cluster first: recovery and the object runtime act only on what
	// this node owns. lost reaches the object and session runtimes built
	// below, once they are (the renewal loop runs from now on).
	var lostObjects atomic.Pointer[object.Runtime]
	var lostSessions atomic.Pointer[session.Runtime]
	node, err := joinCluster(ctx, cfg, st, func(res string) {
		if o := lostObjects.Load(); o != nil {
			o.Lost(res)
		}
		if s := lostSessions.Load(); s != nil {
			s.Lost(res)
		}
	}, log)
	if err != nil {
		d.closeStores()
		return nil, err
	}
	if node != nil {
		d.cluster = node.Node
		d.AddService(node)
	}
	mgr, closers, err := newSandboxManager(cfg, st, blobs, gc, proxy, d.registry, log)
	if err != nil {
		d.closeStores()
		return nil, err
	}
	d.sandboxes, d.closers = mgr, append(d.closers, closers...)
	d.packages = pkgs
	pkgs.SetSandboxes(mgr)
	mgr.AddHooks(pkgs.Hooks())
	d.files = files.New(files.Config{Store: st, Blobs: blobs, MaxBytes: cfg.Files.MaxUploadBytes, Pins: gc,
		Log: log.With("component", "files"), BeforeRecord: fileFaults(cfg.Home)})
	d.resources = newResources(cfg, st, mgr, d.vaults, log)
	if d.resources != nil {
		d.resources.SetFiles(resourceFiles{d.files})
		if d.memory != nil {
			d.resources.SetMemory(resourceMemory{d.memory})
		}
	}
	objects, err := newObjectRuntime(cfg, st, mgr, blobs, gc, d.cluster, d.registry, log)
	if err != nil {
		d.closeStores()
		return nil, err
	}
	lostObjects.Store(objects)
	// Before the GC's first pass (Run starts it): bundles an earlier version
	// stored without a row are held by nothing until they are adopted.
	if err := objects.AdoptLegacyBundles(ctx); err != nil {
		d.closeStores()
		return nil, fmt.Errorf("object bundles stored by an earlier version: %w", err)
	}
	if _, err := mgr.Recover(ctx); err != nil {
		d.closeStores()
		return nil, fmt.Errorf("recover sandboxes: %w", err)
	}
	d.AddService(mgr)
	d.AddService(pkgs) // stops before the manager: its build sandboxes are destroyed
	// After recovery, so the first pass (at start) sees the rows recovery
	// settled; writers pin their keys, so it may run beside them.
	d.AddService(gc)
	d.AddService(objects)
	d.AddService(session.NewSweeper(st, session.SweeperConfig{Log: log}))
	d.fileReaper = d.files.NewReaper(files.ReaperConfig{})
	d.AddService(d.fileReaper)
	managed, events, runner := newManagedAPI(st, log)
	if events != nil {
		managed.SandboxNetwork = cfg.Sandbox.Network
		managed.Vaults = d.vaults
		managed.Memory = d.memory
		managed.Skills = d.skills
		managed.Packages = pkgs
		managed.Resources = d.resources
		if ws, ok := st.(store.WorkStore); ok {
			managed.Work = envwork.New(envwork.Options{Store: ws, LeaseTTL: cfg.WorkQueue.LeaseTTL.D(), Log: log})
		}
		d.events, d.runner = events, runner
		d.AddService(events)
		ws := wsnap.Sandboxes{Locker: mgr, Snaps: d.snaps}
		managed.Lineage = newLineage(st, events, runner.Wake, ws, mgr, d.resources, log)
		rt, err := newSessionRuntime(cfg, st, events, mgr, sessionServices{vaults: d.vaults, skills: d.skills, packages: pkgs,
			resources: d.resources, workspaces: ws, work: managed.Work, cluster: d.cluster}, log)
		if err != nil {
			d.closeStores()
			return nil, err
		}
		runner.set(rt)
		lostSessions.Store(rt)
		d.AddService(rt)
	}
	d.webhooks = newWebhooks(cfg, st, log)
	d.AddService(d.webhooks)
	mon, err := newMonitor(cfg, st, mgr, wsnap.Sandboxes{Locker: mgr, Snaps: d.snaps}, log)
	if err != nil {
		d.closeStores()
		return nil, err
	}
	if mon != nil {
		d.AddService(mon)
	}
	d.server = api.New(api.Options{
		Store:        st,
		Log:          log,
		Registry:     d.registry,
		MaxBodyBytes: cfg.Server.MaxBodyBytes,
		Version:      version.String(),
		Sandboxes:    mgr,
		MaxFileBytes: cfg.Sandbox.MaxFileBytes,
		Objects:      objects,
		Managed:      managed,
		Monitor:      mon,
		Files:        d.files,
		Webhooks:     d.webhooks,
		Cluster:      d.cluster,
	})
	// The web console, a client of the API in this process.
	con, err := console.New(console.Options{API: d.server, Auth: d.server, Log: log.With("component", "console"), Version: version.String(),
		Price: priceList(cfg).Lookup})
	if err != nil {
		d.closeStores()
		return nil, err
	}
	d.server.Handle(console.Prefix+"/", con)
	d.server.Handle(console.Prefix, con)
	if svc := d.server.ManagedService(); svc != nil {
		// Added last, so stopped first: no run starts while the session
		// runtime stops.
		if sched := svc.NewDeploymentScheduler(managedsvc.SchedulerConfig{AfterClaim: deploymentFaults(cfg.Home), Log: log}); sched != nil {
			d.AddService(sched)
		}
	}
	return d, nil
}

// OpenStore opens the configured store engine.
func OpenStore(ctx context.Context, cfg config.Config) (store.Store, error) {
	switch cfg.Store.Engine {
	case "postgres":
		st, err := postgres.Open(ctx, cfg.Store.URL)
		if err != nil {
			return nil, fmt.Errorf("open postgres store: %w", err)
		}
		return st, nil
	default:
		st, err := sqlite.Open(ctx, cfg.StatePath(), sqliteFaults(cfg.Home)...)
		if err != nil {
			return nil, fmt.Errorf("open sqlite store %s: %w", cfg.StatePath(), err)
		}
		return st, nil
	}
}

// AddService registers a background service; Run starts it and shutdown
// stops it, in reverse order of registration.
func (d *Daemon) AddService(s Service) { d.services = append(d.services, s) }

// Webhooks returns the webhook service.
func (d *Daemon) Webhooks() *webhook.Service { return d.webhooks }

// Vaults returns the vault service (nil without Managed Agents storage):
// the session layer asks it for credentials.
func (d *Daemon) Vaults() *vault.Service { return d.vaults }

// Files returns the Files API's service: the session layer stores the
// files a session produced through it.
func (d *Daemon) Files() *files.Service { return d.files }

// FileReaper is the service deleting expired files (tests run a pass).
func (d *Daemon) FileReaper() *files.Reaper { return d.fileReaper }

// Memory returns the memory store service (nil without Managed Agents
// storage): session resources mount and sync stores through it.
func (d *Daemon) Memory() *memory.Service { return d.memory }

// Packages returns the environments' package builder.
func (d *Daemon) Packages() *packages.Service { return d.packages }

// Sandboxes returns the sandbox manager.
func (d *Daemon) Sandboxes() *sandbox.Manager { return d.sandboxes }

// Store returns the daemon's store (tests, benchmarks).
func (d *Daemon) Store() store.Store { return d.store }

// Blobs returns the daemon's blob store.
func (d *Daemon) Blobs() blob.Store { return d.blobs }

// Handler returns the HTTP handler (tests use it with httptest).
func (d *Daemon) Handler() http.Handler { return d.server }

// Listen binds the configured address. Addr is valid afterwards.
func (d *Daemon) Listen() error {
	ln, err := net.Listen("tcp", d.cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s (listen / AGENTKERNEL_LISTEN / --listen): %w", d.cfg.Listen, err)
	}
	d.listener = ln
	return nil
}

// Addr is the bound address, e.g. 127.0.0.1:18888.
func (d *Daemon) Addr() string {
	if d.listener == nil {
		return d.cfg.Listen
	}
	return d.listener.Addr().String()
}

// Run starts the services and serves until ctx is cancelled, then shuts
// down gracefully: new connections stop, in-flight requests finish (up to
// server.shutdown_timeout), every service stops, the store closes.
func (d *Daemon) Run(ctx context.Context) error {
	if d.listener == nil {
		if err := d.Listen(); err != nil {
			d.closeStores()
			return err
		}
	}
	// Services live until Stop, not until ctx: a shutdown that arrives while
	// they start must still stop them cleanly, not fail their start.
	svcCtx := context.WithoutCancel(ctx)
	for i, s := range d.services {
		if err := s.Start(svcCtx); err != nil {
			for _, started := range d.services[:i] {
				started.Stop()
			}
			d.closeStores()
			return fmt.Errorf("start service: %w", err)
		}
	}
	d.httpServer = &http.Server{
		Handler:           d.server,
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(d.log.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return context.WithoutCancel(ctx) },
	}
	if d.events != nil {
		// Event streams never end on their own; end them when shutdown
		// starts so in-flight requests can finish (clients reconnect).
		d.httpServer.RegisterOnShutdown(d.events.Close)
	}
	d.log.Info("agentkernel serving", "addr", d.Addr(), "version", version.String(),
		"store", d.store.Engine(), "home", d.cfg.Home)

	errc := make(chan error, 1)
	go func() { errc <- d.httpServer.Serve(d.listener) }()

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	d.shutdown()
	if serveErr != nil && !errors.Is(serveErr, http.ErrServerClosed) {
		return serveErr
	}
	return nil
}

func (d *Daemon) shutdown() {
	d.stopOnce.Do(func() {
		d.log.Info("shutting down")
		// Cleanup must finish even though the run context is cancelled.
		ctx, cancel := context.WithTimeout(context.Background(), d.cfg.Server.ShutdownTimeout.D())
		defer cancel()
		if err := d.httpServer.Shutdown(ctx); err != nil {
			d.log.Warn("http shutdown did not finish in time", "err", err)
			_ = d.httpServer.Close()
		}
		for i := len(d.services) - 1; i >= 0; i-- {
			d.services[i].Stop()
		}
		d.closeStores()
		d.log.Info("stopped")
	})
}

func (d *Daemon) closeStores() {
	if d.sandboxes != nil {
		d.sandboxes.Close()
	}
	for _, c := range d.closers {
		_ = c()
	}
	if err := d.store.Close(); err != nil {
		d.log.Warn("store close", "err", err)
	}
	if err := d.blobs.Close(); err != nil {
		d.log.Warn("blob store close", "err", err)
	}
	d.lock.release()
}

// Server returns the API server, so tests and later capabilities can add
// routes.
func (d *Daemon) Server() *api.Server { return d.server }
