package sandbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/store"
)

// call runs fn against the sandbox's guest through the lazy wrapper: the
// sandbox is woken if cold, the warm marker is re-probed, and warm-up runs
// again when the sandbox was recycled. fn runs under the entry's read lock,
// so no hibernation can start while it runs, and it renews sleep_after.
func (m *Manager) call(ctx context.Context, tenantID, id string, fn func(c *guest.Client) error) error {
	e := m.entry(id)
	if err := m.checkTenant(ctx, e, tenantID, id); err != nil {
		return err
	}
	for attempt := 0; ; attempt++ {
		e.mu.RLock()
		// activeGen is this node's knowledge that the sandbox is active at
		// that generation: it is set at the end of a warm-up and cleared by
		// every transition, all of which hold the write lock. With it the
		// common path reads nothing from the store.
		gen := e.activeGen.Load()
		if gen == 0 {
			sb, err := m.cfg.Store.GetSandbox(ctx, id)
			if err != nil {
				e.mu.RUnlock()
				return err
			}
			if Derive(sb) == StateDestroyed {
				e.mu.RUnlock()
				return fmt.Errorf("sandbox %s: %w", id, ErrDestroyed)
			}
			if Derive(sb) == StateActive && e.client != nil {
				gen = sb.Generation
			}
		}
		if gen != 0 && e.client != nil && m.markerFresh(ctx, e, gen) {
			m.touch(ctx, e, id)
			e.inflight.Add(1)
			err := fn(e.client)
			e.inflight.Add(-1)
			if err != nil && isTransport(err) {
				// The guest went away mid-call: make the next call re-probe.
				e.probedAt.Store(0)
				e.activeGen.Store(0)
				err = fmt.Errorf("sandbox %s: the guest did not answer (%w): %w", id, err, ErrUnavailable)
			}
			m.touch(ctx, e, id)
			e.mu.RUnlock()
			return err
		}
		e.activeGen.Store(0)
		e.mu.RUnlock()
		if attempt >= 2 {
			return fmt.Errorf("sandbox %s: %w: could not bring it to active", id, ErrUnavailable)
		}
		e.mu.Lock()
		err := m.wake(ctx, e, id)
		e.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// checkTenant makes another tenant's sandbox indistinguishable from a
// missing one. A sandbox's tenant never changes, so it is cached.
func (m *Manager) checkTenant(ctx context.Context, e *entry, tenantID, id string) error {
	owner, _ := e.tenant.Load().(string)
	if owner == "" {
		sb, err := m.cfg.Store.GetSandbox(ctx, id)
		if err != nil {
			return err
		}
		if err := m.here(sb); err != nil {
			return err
		}
		owner = sb.TenantID
		e.tenant.Store(owner)
	}
	if tenantID != "" && owner != tenantID {
		return fmt.Errorf("sandbox %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// markerFresh re-probes the warm marker, at most once per markerTTL while
// calls succeed: a recycled sandbox loses its guest, so its next call fails
// at the transport and forces a re-probe. This keeps the seed's lazy
// wrapper without a second guest round trip on every call.
func (m *Manager) markerFresh(ctx context.Context, e *entry, gen int64) bool {
	now := time.Now().UnixNano()
	if now-e.probedAt.Load() < int64(m.cfg.MarkerTTL) && e.probedGen.Load() == gen {
		return true
	}
	if !m.markerOK(ctx, e.client, gen) {
		e.probedAt.Store(0)
		return false
	}
	e.probedAt.Store(now)
	e.probedGen.Store(gen)
	return true
}

// isTransport reports whether err came from reaching the guest rather than
// from the guest's answer.
func isTransport(err error) bool {
	var ge *guest.Error
	return !errors.As(err, &ge) && !errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded)
}

// touch renews LastActivityAt, persisting at most once a second per
// sandbox: the idle clock has second resolution anyway.
func (m *Manager) touch(ctx context.Context, e *entry, id string) {
	now := m.clock.Now()
	if now.UnixNano()-e.lastTouch.Load() < int64(touchPersistThreshold) {
		return
	}
	e.lastTouch.Store(now.UnixNano())
	if err := m.cfg.Store.TouchSandbox(ctx, id, now); err != nil {
		m.log.WarnContext(ctx, "sandbox touch", "sandbox", id, "err", err)
	}
}

// Exec runs a command in the sandbox, streaming output to onOutput.
func (m *Manager) Exec(ctx context.Context, tenantID, id string, req guest.ExecRequest, onOutput func(stream string, data []byte)) (*guest.ExecResult, error) {
	var res *guest.ExecResult
	err := m.call(ctx, tenantID, id, func(c *guest.Client) error {
		var err error
		res, err = c.Exec(ctx, req, onOutput)
		return err
	})
	return res, err
}

// StartProcess starts a background process.
func (m *Manager) StartProcess(ctx context.Context, tenantID, id string, req guest.ExecRequest) (*guest.ProcessInfo, error) {
	var p *guest.ProcessInfo
	err := m.call(ctx, tenantID, id, func(c *guest.Client) error {
		var err error
		p, err = c.StartProcess(ctx, req)
		return err
	})
	return p, err
}

// ListProcesses lists background processes.
func (m *Manager) ListProcesses(ctx context.Context, tenantID, id string) ([]guest.ProcessInfo, error) {
	var ps []guest.ProcessInfo
	err := m.call(ctx, tenantID, id, func(c *guest.Client) error {
		var err error
		ps, err = c.ListProcesses(ctx)
		return err
	})
	return ps, err
}

// ReadFileMax reads a regular file of at most max bytes inside the
// sandbox (guest.Client.ReadFileMax): the daemon never holds more.
func (m *Manager) ReadFileMax(ctx context.Context, tenantID, id, path string, max int64) ([]byte, error) {
	var b []byte
	err := m.call(ctx, tenantID, id, func(c *guest.Client) error {
		var err error
		b, err = c.ReadFileMax(ctx, path, max)
		return err
	})
	return b, err
}

// WriteFile writes a file inside the sandbox (atomically, parents created).
func (m *Manager) WriteFile(ctx context.Context, tenantID, id, path string, data []byte, mode uint32) error {
	return m.call(ctx, tenantID, id, func(c *guest.Client) error {
		return c.WriteFile(ctx, guest.WriteFileRequest{Path: path, Data: data, Mode: mode})
	})
}

// Stat describes a file inside the sandbox.
func (m *Manager) Stat(ctx context.Context, tenantID, id, path string) (*guest.FileInfo, error) {
	var fi *guest.FileInfo
	err := m.call(ctx, tenantID, id, func(c *guest.Client) error {
		var err error
		fi, err = c.Stat(ctx, path)
		return err
	})
	return fi, err
}

// ListDir lists a directory inside the sandbox.
func (m *Manager) ListDir(ctx context.Context, tenantID, id, path string) ([]guest.FileInfo, error) {
	var out []guest.FileInfo
	err := m.call(ctx, tenantID, id, func(c *guest.Client) error {
		var err error
		out, err = c.ListDir(ctx, path)
		return err
	})
	return out, err
}

// Remove removes a file or directory inside the sandbox.
func (m *Manager) Remove(ctx context.Context, tenantID, id, path string, recursive bool) error {
	return m.call(ctx, tenantID, id, func(c *guest.Client) error {
		return c.Remove(ctx, guest.RemoveRequest{Path: path, Recursive: recursive})
	})
}

// Client runs fn with the sandbox's guest client through the lazy wrapper
// (for callers that need the raw guest protocol, e.g. the object proxy).
func (m *Manager) Client(ctx context.Context, tenantID, id string, fn func(c *guest.Client) error) error {
	return m.call(ctx, tenantID, id, fn)
}

// IsNotFound reports whether a guest error means a missing file.
func IsNotFound(err error) bool { return guest.IsNotFound(err) }

// ProcessOutput reads a background process's output from an offset.
func (m *Manager) ProcessOutput(ctx context.Context, tenantID, id string, req guest.OutputRequest) (*guest.OutputChunk, error) {
	var out *guest.OutputChunk
	err := m.call(ctx, tenantID, id, func(c *guest.Client) error {
		var err error
		out, err = c.ProcessOutput(ctx, req)
		return err
	})
	return out, err
}

// KillProcess kills a background process's whole process group.
func (m *Manager) KillProcess(ctx context.Context, tenantID, id, processID string) (*guest.ProcessInfo, error) {
	var p *guest.ProcessInfo
	err := m.call(ctx, tenantID, id, func(c *guest.Client) error {
		var err error
		p, err = c.KillProcess(ctx, processID, 0)
		return err
	})
	return p, err
}
