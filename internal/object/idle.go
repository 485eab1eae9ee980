package object

import (
	"context"
	"sort"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// SweepReport says what one idle pass did (a test signal).
type SweepReport struct {
	Hibernated []store.ObjectKey
	Failed     []store.ObjectKey
}

// idlePass hibernates objects idle for their class's idle_timeout and
// persists LastCallAt of objects called since the last pass (one write per
// object per pass instead of one per call).
func (r *Runtime) idlePass(ctx context.Context) {
	now := r.clock.Now()
	r.mu.Lock()
	actors := make([]*actor, 0, len(r.actors))
	for _, a := range r.actors {
		actors = append(actors, a)
	}
	r.mu.Unlock()
	sort.Slice(actors, func(i, j int) bool { return actors[i].lastCall.Load() < actors[j].lastCall.Load() })
	var rep SweepReport
	for _, a := range actors {
		if ctx.Err() != nil {
			return
		}
		last := a.lastCall.Load()
		if last > a.touched.Load() {
			a.touched.Store(last)
			if err := r.st.TouchObject(ctx, a.key, time.Unix(0, last)); err != nil && ctx.Err() == nil {
				r.log.DebugContext(ctx, "object: touch", "object", subject(a.key), "err", err)
			}
		}
		idle := DefaultIdleTimeout
		if cls, err := r.Class(ctx, a.key.TenantID, a.key.Class); err == nil {
			idle = cls.IdleTimeout
		}
		if now.Sub(time.Unix(0, last)) < idle || !a.gate.tryAcquire(a.gate.size) {
			continue
		}
		a.life.Lock()
		state := a.state
		a.life.Unlock()
		switch state {
		case stateActive:
			if err := r.hibernateHeld(ctx, a, "idle"); err != nil {
				rep.Failed = append(rep.Failed, a.key)
				r.log.WarnContext(ctx, "object: idle hibernation failed", "object", subject(a.key), "err", err)
			} else {
				rep.Hibernated = append(rep.Hibernated, a.key)
			}
		case stateHibernating, stateUnknown:
			// Nothing runs for it: drop it from memory. Anyone who took it
			// meanwhile sees stateGone and looks again.
			a.life.Lock()
			a.state = stateGone
			a.life.Unlock()
			r.forget(a)
		}
		a.gate.release(a.gate.size)
	}
	r.stopEmptyShared(ctx)
	if r.cfg.Swept != nil {
		select {
		case r.cfg.Swept <- rep:
		case <-ctx.Done():
		}
	}
}
