package packages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Sandboxes is the part of the sandbox manager builds use.
type Sandboxes interface {
	Resolve(ctx context.Context, p *sandbox.CreateParams) (sandbox.Limits, error)
	Create(ctx context.Context, p sandbox.CreateParams) (*sandbox.Info, error)
	Exec(ctx context.Context, tenantID, id string, req guest.ExecRequest, onOutput func(stream string, data []byte)) (*guest.ExecResult, error)
	Destroy(ctx context.Context, tenantID, id string) (*sandbox.Info, error)
}

// Config configures a Service.
type Config struct {
	Store     store.PackageBuildStore
	Sandboxes Sandboxes
	// Dir holds the layers (Dir/layers/<id>) and the builds in progress
	// (Dir/staging/<id>); the daemon's alone.
	Dir string
	// PipIndexURL and NpmRegistry point the managers at the operator's
	// indexes; their hosts are what a build may reach beside
	// egress.PackageManagerHosts.
	PipIndexURL string
	NpmRegistry string
	// StepTimeout bounds one install (default 10m).
	StepTimeout time.Duration
	Log         *slog.Logger
}

// Service builds layers and hands them to sandboxes.
type Service struct {
	cfg   Config
	log   *slog.Logger
	hosts []egress.HostPattern

	mu      sync.Mutex
	running map[string]chan struct{} // tenant/key → closed when the build ends
	ready   sync.Map                 // tenant/key → layer dir of a ready build
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// New returns a Service; Close stops its builds.
func New(cfg Config) (*Service, error) {
	if cfg.StepTimeout <= 0 {
		cfg.StepTimeout = 10 * time.Minute
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	for _, d := range []string{cfg.Dir, filepath.Join(cfg.Dir, "layers"), filepath.Join(cfg.Dir, "staging")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, fmt.Errorf("packages dir: %w", err)
		}
	}
	s := &Service{cfg: cfg, log: cfg.Log, running: map[string]chan struct{}{}}
	s.hosts = append(s.hosts, egress.PackageManagerHosts...)
	for _, u := range []string{cfg.PipIndexURL, cfg.NpmRegistry} {
		if h := hostOf(u); h != "" {
			hp, err := egress.ParseHost(h)
			if err != nil {
				return nil, fmt.Errorf("package index %q: %w", u, err)
			}
			s.hosts = append(s.hosts, hp)
		}
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Close stops the builds in progress (they resume at the next Ensure) and
// waits for them.
func (s *Service) Close() {
	s.cancel()
	s.wg.Wait()
}

// hostOf is host:port of an http(s) URL, "" if it has none.
func hostOf(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Hostname() == "" {
		return ""
	}
	port := u.Port()
	if port == "" {
		port = "443"
		if u.Scheme == "http" {
			port = "80"
		}
	}
	return net.JoinHostPort(u.Hostname(), port)
}

// Target resolves the target of an environment's packages: the driver and
// image its sandboxes get (defaults filled as the manager fills them).
func (s *Service) Target(ctx context.Context, spec Spec, driver, image string) (Target, error) {
	p := sandbox.CreateParams{Driver: driver, Image: image}
	if _, err := s.cfg.Sandboxes.Resolve(ctx, &p); err != nil {
		return Target{}, err
	}
	return Target{Spec: spec, Driver: p.Driver, Image: p.Image, PipIndexURL: s.cfg.PipIndexURL, NpmRegistry: s.cfg.NpmRegistry}, nil
}

// dirName is a build's directory name: tenant and key hashed, so nothing
// the API takes becomes a path.
func dirName(tenantID, key string) string {
	h := sha256.Sum256([]byte(tenantID + "\x00" + key))
	return hex.EncodeToString(h[:])
}

func (s *Service) layerDir(tenantID, key string) string {
	return filepath.Join(s.cfg.Dir, "layers", dirName(tenantID, key))
}

func (s *Service) stagingDir(tenantID, key string) string {
	return filepath.Join(s.cfg.Dir, "staging", dirName(tenantID, key))
}

// Ensure returns the build of t for the tenant, starting it when there is
// none, when it was left building by an earlier process, or when it is
// ready but its layer is gone (a restore on another disk): the layer is
// rebuilt from the environment's packages, which are durable.
func (s *Service) Ensure(ctx context.Context, tenantID, envID string, t Target) (*store.PackageBuild, error) {
	key := t.Key()
	b, err := s.cfg.Store.GetPackageBuild(ctx, tenantID, key)
	if errors.Is(err, store.ErrNotFound) {
		b, err = s.cfg.Store.CreatePackageBuild(ctx, &store.PackageBuild{TenantID: tenantID, Key: key, EnvironmentID: envID,
			Status: store.BuildBuilding, Progress: "queued"})
		if err == nil {
			s.start(b, t)
			return b, nil
		}
		if errors.Is(err, store.ErrAlreadyExists) {
			b, err = s.cfg.Store.GetPackageBuild(ctx, tenantID, key)
		}
	}
	if err != nil {
		return nil, err
	}
	switch b.Status {
	case store.BuildBuilding:
		if !s.isRunning(tenantID, key) {
			s.start(b, t)
		}
	case store.BuildReady:
		if _, err := os.Stat(s.layerDir(tenantID, key)); errors.Is(err, os.ErrNotExist) {
			b.Status, b.Progress = store.BuildBuilding, "rebuilding: the layer is missing on this host"
			if b, err = s.cfg.Store.UpdatePackageBuild(ctx, b); err != nil {
				return nil, err
			}
			s.start(b, t)
		}
	}
	return b, nil
}

func runKey(tenantID, key string) string { return tenantID + "/" + key }

func (s *Service) isRunning(tenantID, key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.running[runKey(tenantID, key)]
	return ok
}

// start runs the build in the background, once per process.
func (s *Service) start(b *store.PackageBuild, t Target) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rk := runKey(b.TenantID, b.Key)
	if _, ok := s.running[rk]; ok || s.ctx.Err() != nil {
		return
	}
	done := make(chan struct{})
	s.running[rk] = done
	own := *b // the build writes its own copy; the caller keeps b
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		defer func() {
			s.mu.Lock()
			delete(s.running, rk)
			s.mu.Unlock()
			close(done)
		}()
		if err := s.build(s.ctx, &own, t); err != nil && s.ctx.Err() == nil {
			// Not a package's failure but the daemon's (its disk, its
			// store): the build fails with the error rather than being
			// retried forever by every waiter.
			s.log.Error("package build", "tenant", b.TenantID, "key", b.Key, "err", err)
			if cur, gerr := s.cfg.Store.GetPackageBuild(s.ctx, b.TenantID, b.Key); gerr == nil && cur.Status == store.BuildBuilding {
				_ = s.finish(cur, store.BuildFailed, "", "the daemon could not build the layer: "+err.Error())
			}
		}
	}()
}

// FailedError is a build that failed: it names the package.
type FailedError struct {
	Manager, Package string
	LogTail          string
}

func (e *FailedError) Error() string {
	if e.Package == "" {
		return "the environment's packages failed to build: " + e.LogTail
	}
	msg := fmt.Sprintf("the environment's packages failed to build: %s package %q did not install", e.Manager, e.Package)
	if e.LogTail != "" {
		msg += ":\n" + e.LogTail
	}
	return msg
}

// failed turns a failed build row into its error.
func failed(b *store.PackageBuild) error {
	mgr, pkg, _ := strings.Cut(b.Package, ":")
	return &FailedError{Manager: mgr, Package: pkg, LogTail: b.LogTail}
}

// Wait ensures the build of t and waits until it is ready (returning the
// metadata a sandbox of the layer gets) or failed (a *FailedError).
func (s *Service) Wait(ctx context.Context, tenantID, envID string, t Target) (map[string]string, error) {
	for {
		b, err := s.Ensure(ctx, tenantID, envID, t)
		if err != nil {
			return nil, err
		}
		switch b.Status {
		case store.BuildReady:
			return map[string]string{MetaLayer: b.Key}, nil
		case store.BuildFailed:
			return nil, failed(b)
		}
		s.mu.Lock()
		done := s.running[runKey(tenantID, b.Key)]
		s.mu.Unlock()
		if done == nil {
			// Finished between Ensure and here, or the service is closing.
			if s.ctx.Err() != nil {
				return nil, fmt.Errorf("package build: %w", s.ctx.Err())
			}
			continue
		}
		select {
		case <-done:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// Status is a build's state as the environment shows it, nil for an
// environment without packages. It starts only a build an earlier process
// left unfinished.
func (s *Service) Status(ctx context.Context, tenantID string, t Target) (*store.PackageBuild, error) {
	if t.Spec.Empty() {
		return nil, nil
	}
	b, err := s.cfg.Store.GetPackageBuild(ctx, tenantID, t.Key())
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	}
	if err == nil && b.Status == store.BuildBuilding && !s.isRunning(tenantID, b.Key) {
		// Left building by a process that stopped: resume it, so the state
		// shown moves on without waiting for a session to ask.
		s.start(b, t)
	}
	return b, err
}

// Layer implements session.PackageLayers: it waits for the layer of
// env's packages (building it if needed) and returns the metadata of a
// sandbox that starts from it; nil when env has no packages.
func (s *Service) Layer(ctx context.Context, env *store.Environment, driver, image string) (map[string]string, error) {
	spec, err := EnvSpec(env)
	if err != nil || spec.Empty() {
		return nil, err
	}
	t, err := s.Target(ctx, spec, driver, image)
	if err != nil {
		return nil, err
	}
	return s.Wait(ctx, env.TenantID, env.ID, t)
}

// EnvSpec reads an environment's config.packages from its stored doc.
func EnvSpec(env *store.Environment) (Spec, error) {
	var doc struct {
		Config json.RawMessage `json:"config"`
	}
	if len(env.Doc) > 0 {
		if err := json.Unmarshal(env.Doc, &doc); err != nil {
			return Spec{}, fmt.Errorf("environment %s: %w", env.ID, err)
		}
	}
	return FromConfig(doc.Config)
}

// SetSandboxes gives the service the sandbox manager, which is built
// after the egress proxy that asks the service for build policies.
func (s *Service) SetSandboxes(sb Sandboxes) { s.cfg.Sandboxes = sb }

// Start implements the daemon's Service; builds start on demand.
func (s *Service) Start(context.Context) error { return nil }

// Stop implements the daemon's Service: builds in progress stop (their
// sandboxes are destroyed) and resume at the next Ensure.
func (s *Service) Stop() { s.Close() }
