package packages

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// maxLogTail is how much of a failed step's output the build keeps.
const maxLogTail = 4 << 10

// build runs t's installs in a build sandbox that has the staging
// directory mounted read-write at Path, then moves the directory to the
// layers. The sandbox's writes are never read by the daemon: the layer is
// only ever mounted read-only into the tenant's sandboxes.
func (s *Service) build(ctx context.Context, b *store.PackageBuild, t Target) error {
	start := time.Now()
	if b.SandboxID != "" {
		// An earlier process was stopped mid-build: its build sandbox
		// outlived it. Destroy it before building again.
		if _, err := s.cfg.Sandboxes.Destroy(ctx, b.TenantID, b.SandboxID); err != nil && !errors.Is(err, store.ErrNotFound) && !errors.Is(err, sandbox.ErrDestroyed) {
			s.log.Warn("destroy an earlier build sandbox", "sandbox", b.SandboxID, "err", err)
		}
	}
	staging := s.stagingDir(b.TenantID, b.Key)
	if err := os.RemoveAll(staging); err != nil {
		return err
	}
	if err := os.Mkdir(staging, 0o755); err != nil {
		return err
	}
	defer os.RemoveAll(staging)
	info, err := s.cfg.Sandboxes.Create(ctx, sandbox.CreateParams{
		TenantID: b.TenantID, Driver: t.Driver, Image: t.Image, Cold: true,
		// Behind the proxy whatever the daemon's default: the installs run
		// the packages' own scripts, and the build's policy lets them
		// reach the registries and nothing else.
		Network:  sandbox.NetworkEgress,
		Metadata: map[string]string{MetaBuild: b.Key},
	})
	if err != nil {
		return s.finish(b, store.BuildFailed, "sandbox:", fmt.Sprintf("create the build sandbox: %v", err))
	}
	destroyed := false
	destroy := func() {
		if destroyed {
			return
		}
		destroyed = true
		if _, err := s.cfg.Sandboxes.Destroy(context.WithoutCancel(ctx), b.TenantID, info.ID); err != nil {
			s.log.Warn("destroy package build sandbox", "sandbox", info.ID, "err", err)
		}
	}
	defer destroy()
	steps := t.steps()
	b.SandboxID, b.Progress = info.ID, fmt.Sprintf("0/%d", len(steps))
	if b, err = s.cfg.Store.UpdatePackageBuild(ctx, b); err != nil {
		return err
	}
	for i, st := range steps {
		b.Progress = fmt.Sprintf("%d/%d: %s %s", i+1, len(steps), st.Manager, st.Package)
		if b, err = s.cfg.Store.UpdatePackageBuild(ctx, b); err != nil {
			return err
		}
		out := &tail{max: maxLogTail}
		res, err := s.cfg.Sandboxes.Exec(ctx, b.TenantID, info.ID, guest.ExecRequest{
			Argv: st.Argv, TimeoutMS: s.cfg.StepTimeout.Milliseconds(),
		}, func(_ string, data []byte) { out.Write(data) })
		if ctx.Err() != nil {
			return ctx.Err() // shutting down: the next process resumes it
		}
		switch {
		case err != nil:
			out.Write([]byte("\n" + err.Error()))
		case res.TimedOut:
			out.Write([]byte(fmt.Sprintf("\ntimed out after %s", s.cfg.StepTimeout)))
		case res.ExitCode != 0:
			out.Write([]byte(fmt.Sprintf("\nexit status %d", res.ExitCode)))
		default:
			continue
		}
		return s.finish(b, store.BuildFailed, st.Manager+":"+st.Package, out.String())
	}
	// Nothing left in the build sandbox (a background process of an
	// install script) may write through its bind into the published layer.
	destroy()
	layer := s.layerDir(b.TenantID, b.Key)
	if err := os.RemoveAll(layer); err != nil {
		return err
	}
	// The layers directory itself may be gone with what it held (a
	// restore on another disk, an operator's cleanup).
	if err := os.MkdirAll(filepath.Dir(layer), 0o755); err != nil {
		return err
	}
	if err := os.Rename(staging, layer); err != nil {
		return err
	}
	s.log.Info("package layer built", "tenant", b.TenantID, "key", b.Key, "packages", len(steps), "took", time.Since(start))
	return s.finish(b, store.BuildReady, "", "")
}

func (s *Service) finish(b *store.PackageBuild, status, pkg, logTail string) error {
	b.Status, b.Package, b.LogTail, b.SandboxID = status, pkg, logTail, ""
	if status == store.BuildReady {
		b.Progress = "done"
	}
	_, err := s.cfg.Store.UpdatePackageBuild(context.WithoutCancel(s.ctx), b)
	return err
}

// tail keeps the last max bytes written.
type tail struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (t *tail) Write(p []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if len(t.buf) > t.max {
		t.buf = append([]byte(nil), t.buf[len(t.buf)-t.max:]...)
	}
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}

// lookup is the build a sandbox's metadata names, if the store has it for
// the sandbox's tenant.
func (s *Service) lookup(sb *store.Sandbox, meta string) *store.PackageBuild {
	key := sb.Metadata[meta]
	if key == "" {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, 10*time.Second)
	defer cancel()
	b, err := s.cfg.Store.GetPackageBuild(ctx, sb.TenantID, key)
	if err != nil {
		if !errors.Is(err, store.ErrNotFound) {
			s.log.Warn("package build lookup", "sandbox", sb.ID, "err", err)
		}
		return nil
	}
	return b
}

// building is the build sb runs, if sb is the build sandbox its row names.
func (s *Service) building(sb *store.Sandbox) *store.PackageBuild {
	b := s.lookup(sb, MetaBuild)
	if b == nil || b.Status != store.BuildBuilding || b.SandboxID != sb.ID {
		return nil
	}
	return b
}

// Hooks mount the staging directory into a build sandbox (read-write)
// and a ready layer into the sandboxes that name it (read-only).
func (s *Service) Hooks() sandbox.Hooks {
	layer := func(sb *store.Sandbox) string {
		// A ready build never changes, so its directory is remembered and
		// a start reads nothing from the store (wake latency).
		if key := sb.Metadata[MetaLayer]; key != "" {
			if dir, ok := s.ready.Load(runKey(sb.TenantID, key)); ok {
				if fi, err := os.Lstat(dir.(string)); err == nil && fi.IsDir() {
					return dir.(string)
				}
				s.ready.Delete(runKey(sb.TenantID, key))
			}
		}
		if b := s.lookup(sb, MetaLayer); b != nil && b.Status == store.BuildReady {
			dir := s.layerDir(b.TenantID, b.Key)
			if fi, err := os.Lstat(dir); err == nil && fi.IsDir() {
				s.ready.Store(runKey(b.TenantID, b.Key), dir)
				return dir
			}
			s.log.Warn("a sandbox's package layer is missing on this host; it starts without it", "sandbox", sb.ID, "key", b.Key)
		}
		return ""
	}
	return sandbox.Hooks{
		Mounts: func(sb *store.Sandbox) []sandbox.Mount {
			if b := s.building(sb); b != nil {
				return []sandbox.Mount{{Source: s.stagingDir(b.TenantID, b.Key), Target: Path}}
			}
			if dir := layer(sb); dir != "" {
				return []sandbox.Mount{{Source: dir, Target: Path, ReadOnly: true}}
			}
			return nil
		},
		Env: func(sb *store.Sandbox) map[string]string {
			if s.building(sb) != nil || layer(sb) != "" {
				return Env(basePath)
			}
			return nil
		},
	}
}

// Policy is the egress policy of a build sandbox: the package registries
// and the configured indexes, nothing else. Any other sandbox gets
// egress.ErrNoPolicy.
func (s *Service) Policy(ctx context.Context, sb *store.Sandbox) (*egress.Policy, error) {
	b := s.building(sb)
	if b == nil {
		return nil, fmt.Errorf("sandbox %s is no package build's sandbox: %w", sb.ID, egress.ErrNoPolicy)
	}
	return &egress.Policy{TenantID: sb.TenantID, SandboxID: sb.ID, Allow: s.hosts,
		Describe: fmt.Sprintf("environment %s package build (package registries and configured indexes)", b.EnvironmentID)}, nil
}
