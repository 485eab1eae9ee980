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
