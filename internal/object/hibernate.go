package object

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Hibernate hibernates an object now: after the calls queued before it,
// and before the ones that arrive after it.
func (r *Runtime) Hibernate(ctx context.Context, key store.ObjectKey) (*store.Object, error) {
	if err := r.exclusive(ctx, key, func(a *actor) error { return r.hibernateHeld(ctx, a, "requested") }); err != nil {
		return nil, err
	}
	return r.st.GetObject(ctx, key)
}

// Checkpoint persists the object's storage without hibernating it. In
// write-through mode the store already holds every write: nothing to do.
func (r *Runtime) Checkpoint(ctx context.Context, key store.ObjectKey) (*store.Object, error) {
	err := r.exclusive(ctx, key, func(a *actor) error {
		a.life.Lock()
		defer a.life.Unlock()
		if a.state != stateActive {
			return nil
		}
		cls, err := r.Class(ctx, key.TenantID, key.Class)
		if err != nil {
			return err
		}
		if cls.StorageMode == ModeWriteThrough {
			return nil
		}
		st, err := r.dump(ctx, a)
		if err != nil {
			return err
		}
		_, err = r.st.ReplaceObjectStorage(ctx, key, st)
		return err
	})
	if err != nil {
		return nil, err
	}
	return r.st.GetObject(ctx, key)
}

// exclusive runs fn on an existing object with its whole gate held.
func (r *Runtime) exclusive(ctx context.Context, key store.ObjectKey, fn func(a *actor) error) error {
	for {
		o, err := r.st.GetObject(ctx, key)
		if err != nil {
			return err
		}
		cls, err := r.Class(ctx, key.TenantID, key.Class)
		if err != nil {
			// The class is gone; the object can still be handled with the
			// defaults.
			cls = classFromDef(ClassDef{Class: key.Class, InitCommand: []string{"?"}}, false)
		}
		a := r.actor(key, cls)
		if err := a.gate.acquire(ctx, a.gate.size); err != nil {
			return err
		}
		a.life.Lock()
		err = nil
		switch a.state {
		case stateGone:
			a.life.Unlock()
			a.gate.release(a.gate.size)
			continue
		case stateUnknown:
			err = r.adopt(ctx, a, o)
		}
		a.life.Unlock()
		if err == nil {
			err = fn(a)
		}
		a.gate.release(a.gate.size)
		if errors.Is(err, errActorGone) {
			continue
		}
		return err
	}
}

// hibernateHeld dumps the storage, persists it and the Hibernating status
// in one transaction, then stops the sandbox. The caller holds the whole
// gate. A failure before the transaction leaves the object Active with its
// previous storage; a failure after it leaves a Hibernating object whose
// sandbox may still run, which the next wake handles.
func (r *Runtime) hibernateHeld(ctx context.Context, a *actor, reason string) error {
	a.life.Lock()
	defer a.life.Unlock()
	if a.state != stateActive {
		return nil
	}
	start := time.Now()
	cls, err := r.Class(ctx, a.key.TenantID, a.key.Class)
	mode := ModeSnapshot
	if err == nil {
		mode = cls.StorageMode
	}
	var st map[string]json.RawMessage
	if mode == ModeWriteThrough {
		// The store holds every acknowledged write and nothing else.
		st, err = r.st.GetObjectStorage(ctx, a.key)
	} else {
		st, err = r.dump(ctx, a)
	}
	if err != nil {
		return err
	}
	if _, err := r.st.HibernateObject(ctx, a.key, st); err != nil {
		return fmt.Errorf("persist the storage of %s: %w", subject(a.key), err)
	}
	r.setState(a, stateHibernating)
	a.sizes = nil
	if sh := a.shared.Load(); sh != nil {
		// Per object: the server forgets it; the sandbox stops only when
		// its last object left.
		r.forgetShared(ctx, a, sh)
		a.shared.Store(nil)
		a.epoch.Store(0)
		r.leave(ctx, a, sh)
	} else if _, err := r.sbx.Hibernate(context.WithoutCancel(ctx), a.key.TenantID, a.sandboxID); err != nil {
		r.log.WarnContext(ctx, "object hibernated but its sandbox did not stop", "object", subject(a.key), "sandbox", a.sandboxID, "err", err)
	} else {
		// Stopped: the bundle it mounted may go if nothing else needs it.
		r.releaseApp(context.WithoutCancel(ctx), a.key.TenantID, a.sandboxID)
	}
	r.metrics.hibernations.WithLabelValues(a.key.Class).Inc()
	r.audit(ctx, a.key, "ObjectHibernated", map[string]any{"reason": reason, "storage_keys": len(st), "duration_ms": time.Since(start).Milliseconds()})
	r.log.InfoContext(ctx, "object hibernated", "object", subject(a.key), "tenant", a.key.TenantID, "reason", reason, "keys", len(st), "duration", time.Since(start))
	return nil
}

// dump reads the object's storage from the server (GET /__storage,
// dump_timeout) and checks it against the limits. The caller holds a.life.
// A shared server that does not hold the object (it restarted since the
// injection) answers nothing of it: the persisted storage is the truth.
func (r *Runtime) dump(ctx context.Context, a *actor) (map[string]json.RawMessage, error) {
	dctx, cancel := context.WithTimeout(ctx, r.lim.DumpTimeout.D())
	defer cancel()
	var st map[string]json.RawMessage
	stale := false
	err := r.sbx.Client(dctx, a.key.TenantID, a.sandboxID, func(c *guest.Client) error {
		if sh := a.shared.Load(); sh != nil {
			sh.serve.RLock()
			defer sh.serve.RUnlock()
			if a.epoch.Load() != sh.epoch.Load() {
				stale = true
				return nil
			}
		}
		var err error
		st, err = dumpStorage(dctx, c.ObjectClient(), a.key)
		return err
	})
	if err == nil && stale {
		st, err = r.st.GetObjectStorage(ctx, a.key)
		if errors.Is(err, store.ErrNotFound) {
			st, err = map[string]json.RawMessage{}, nil
		}
		return st, err
	}
	if err != nil {
		if dctx.Err() != nil && ctx.Err() == nil {
			return nil, fmt.Errorf("%w: GET /__storage of %s took over dump_timeout (%s, durable_objects.dump_timeout); the object stays Active", ErrCallTimeout, subject(a.key), r.lim.DumpTimeout.D())
		}
		return nil, r.sandboxErr(a, err)
	}
	if err := r.checkDump(a.key, st); err != nil {
		return nil, fmt.Errorf("storage not persisted, the object stays Active: %w", err)
	}
	return st, nil
}
