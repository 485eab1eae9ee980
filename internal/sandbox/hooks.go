package sandbox

import (
	"context"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Hooks let the layers built on sandboxes (durable objects, sessions) take
// part in the lifecycle without the manager knowing them. They are the
// seed's warm-up steps "mount resources" and "set contexts".
type Hooks struct {
	// Mounts returns extra mounts for a sandbox at every start (e.g. an
	// object class's app_dir at /app).
	Mounts func(sb *store.Sandbox) []Mount
	// Env returns extra environment for the guest at every start.
	Env func(sb *store.Sandbox) map[string]string
	// AfterWarm runs once the sandbox answers and its workspace is in
	// place, before the warm marker is written (e.g. start an object's
	// server). An error fails the warm-up.
	AfterWarm func(ctx context.Context, sb *store.Sandbox, c *guest.Client) error
	// BeforeStop runs before the manager hibernates (asked or idle) or
	// destroys a sandbox that is not cold, so a layer can take back what
	// the sandbox left while it is still there (session memory stores are
	// synced). It runs without the sandbox's lock held — it may take its
	// own locks, which may be held by a caller waiting for the sandbox —
	// so a call may still be running in the sandbox. Errors are the
	// hook's to log: the stop goes on.
	BeforeStop func(ctx context.Context, sb *store.Sandbox)
}

// AddHooks registers lifecycle hooks. Call it before the manager serves.
func (m *Manager) AddHooks(h Hooks) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.hooks = append(m.hooks, h)
}

func (m *Manager) hookList() []Hooks {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Hooks(nil), m.hooks...)
}

func (m *Manager) hookMounts(sb *store.Sandbox) ([]Mount, map[string]string) {
	var mounts []Mount
	env := map[string]string{}
	for _, h := range m.hookList() {
		if h.Mounts != nil {
			mounts = append(mounts, h.Mounts(sb)...)
		}
		if h.Env != nil {
			for k, v := range h.Env(sb) {
				env[k] = v
			}
		}
	}
	return mounts, env
}

func (m *Manager) runAfterWarm(ctx context.Context, sb *store.Sandbox, c *guest.Client) error {
	for _, h := range m.hookList() {
		if h.AfterWarm != nil {
			if err := h.AfterWarm(ctx, sb, c); err != nil {
				return err
			}
		}
	}
	return nil
}

// runBeforeStop runs the BeforeStop hooks for sandbox id unless it is
// cold or destroyed (nothing ran in it since it last stopped). The caller
// must not hold the sandbox's lock.
func (m *Manager) runBeforeStop(ctx context.Context, id string) {
	hooks := m.hookList()
	var fns []func(context.Context, *store.Sandbox)
	for _, h := range hooks {
		if h.BeforeStop != nil {
			fns = append(fns, h.BeforeStop)
		}
	}
	if len(fns) == 0 {
		return
	}
	sb, err := m.cfg.Store.GetSandbox(ctx, id)
	if err != nil {
		return
	}
	if st := Derive(sb); st == StateCold || st == StateDestroyed {
		return
	}
	for _, fn := range fns {
		fn(ctx, sb)
	}
}
