package sandbox

import (
	"context"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ReapReport says what one reaper pass did.
type ReapReport struct {
	Hibernated     []string
	KeptAlive      []string // idle, but a background process holds it
	Failed         []string
	BackupsExpired int
}

type reaperLoop struct {
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// Start runs the idle reaper every ReapInterval: sandboxes idle for their
// sleep_after are hibernated unless a background process younger than the
// background cap keeps them alive; expired backups are deleted.
func (m *Manager) Start(ctx context.Context) error {
	m.reaper.mu.Lock()
	defer m.reaper.mu.Unlock()
	if m.reaper.cancel != nil {
		return nil
	}
	m.startPool(ctx)
	ctx, m.reaper.cancel = context.WithCancel(context.WithoutCancel(ctx))
	m.reaper.done = make(chan struct{})
	go func(done chan struct{}) {
		defer close(done)
		for {
			select {
			case <-ctx.Done():
				return
			case <-m.clock.After(m.cfg.ReapInterval):
			}
			rep := m.ReapOnce(ctx)
			if m.cfg.Reaped != nil {
				select {
				case m.cfg.Reaped <- rep:
				case <-ctx.Done():
					return
				}
			}
		}
	}(m.reaper.done)
	return nil
}

// Stop stops the reaper and waits for it; idempotent.
func (m *Manager) Stop() {
	m.reaper.mu.Lock()
	cancel, done := m.reaper.cancel, m.reaper.done
	m.reaper.cancel = nil
	m.reaper.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

// Close stops the reaper, ends the pooled sandboxes that wait in the warm
// pool and closes guest clients. Sandboxes keep running.
func (m *Manager) Close() {
	m.Stop()
	m.closePool()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, e := range m.entries {
		e.mu.Lock()
		e.dropClient()
		e.mu.Unlock()
	}
}

// ReapOnce runs one reaper pass now.
func (m *Manager) ReapOnce(ctx context.Context) ReapReport {
	var rep ReapReport
	now := m.clock.Now()
	// Only a running instance can be idle: cold sandboxes (every
	// hibernated object has one) are not read.
	sbs, err := m.cfg.Store.ListSandboxes(ctx, store.ListSandboxesParams{Running: true, Node: m.cfg.Node})
	if err != nil {
		m.log.WarnContext(ctx, "reaper: list sandboxes", "err", err)
		return rep
	}
	for _, sb := range sbs {
		st := Derive(sb)
		if st != StateActive && st != StateWarming {
			continue
		}
		if now.Sub(sb.LastActivityAt) < sb.SleepAfter {
			continue
		}
		e := m.entry(sb.ID)
		if e.inflight.Load() > 0 {
			continue // a call is running: not idle
		}
		// Before the lock: a hook may wait for work that waits for it. A
		// sandbox kept alive below was given the hook for nothing, which
		// is harmless (hooks take back what is there, again).
		m.runBeforeStop(ctx, sb.ID)
		if e.inflight.Load() > 0 || !e.mu.TryLock() {
			continue // a call is running: not idle
		}
		if m.keptAlive(ctx, e, now) {
			e.mu.Unlock()
			rep.KeptAlive = append(rep.KeptAlive, sb.ID)
			continue
		}
		err := m.hibernate(ctx, e, sb.ID, "idle")
		e.mu.Unlock()
		if err != nil {
			rep.Failed = append(rep.Failed, sb.ID)
			m.log.WarnContext(ctx, "reaper: hibernate", "sandbox", sb.ID, "err", err)
			continue
		}
		rep.Hibernated = append(rep.Hibernated, sb.ID)
	}
	expired, err := m.cfg.Store.DeleteExpiredBackups(ctx, now)
	if err != nil {
		m.log.WarnContext(ctx, "reaper: expire backups", "err", err)
	}
	for _, b := range expired {
		if err := m.cfg.Blobs.Delete(ctx, b.BlobKey); err != nil {
			m.log.WarnContext(ctx, "reaper: delete backup blob", "backup", b.ID, "err", err)
		}
	}
	rep.BackupsExpired = len(expired)
	return rep
}

// keptAlive: a running background process keeps the sandbox awake for at
// most BackgroundCap after it started.
func (m *Manager) keptAlive(ctx context.Context, e *entry, now time.Time) bool {
	if e.client == nil {
		return false
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ps, err := e.client.ListProcesses(cctx)
	if err != nil {
		return false
	}
	for _, p := range ps {
		if p.Running && now.Sub(p.StartedAt) < m.cfg.BackgroundCap {
			return true
		}
	}
	return false
}
