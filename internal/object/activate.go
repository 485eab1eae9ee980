package object

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// SandboxKey is the seed's sandbox name of an object, used as the sandbox's
// session key so its backups are found by name.
func SandboxKey(class, id string) string { return "do-" + class + "-" + id }

// activate makes the object Active with a running server: created on the
// first call, woken when Hibernating, its storage re-injected when the
// server may hold writes the store does not. The caller holds the gate.
func (r *Runtime) activate(ctx context.Context, a *actor, cls *Class) (string, error) {
	a.life.Lock()
	defer a.life.Unlock()
	if a.state == stateGone {
		return "", errActorGone
	}
	if a.state == stateUnknown {
		o, err := r.st.GetObject(ctx, a.key)
		if errors.Is(err, store.ErrNotFound) {
			if err := r.create(ctx, a, cls); err != nil {
				return "", err
			}
			return a.sandboxID, nil
		}
		if err != nil {
			return "", err
		}
		if err := r.adopt(ctx, a, o); err != nil {
			return "", err
		}
	}
	if a.state == stateHibernating {
		wake := r.wake
		if cls.Isolation == IsolationClass {
			wake = r.wakeShared
		}
		if err := wake(ctx, a, cls); err != nil {
			return "", err
		}
	}
	if a.shared.Load() != nil {
		// The call injects the storage if the server does not hold it
		// (serveShared).
		return a.sandboxID, nil
	}
	if a.resync && cls.StorageMode == ModeWriteThrough {
		err := r.sbx.Client(ctx, a.key.TenantID, a.sandboxID, func(c *guest.Client) error {
			st, err := r.st.GetObjectStorage(ctx, a.key)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			return restoreStorage(ctx, c.ObjectClient(), a.key, st)
		})
		if errors.Is(err, errNotListening) {
			// The server is not running: the call starts it, and it starts
			// from the persisted storage.
			err = nil
		}
		if err != nil {
			return "", r.sandboxErr(a, err)
		}
		a.sizes = nil
	}
	a.resync = false
	return a.sandboxID, nil
}

// create starts the object's first sandbox, then records the object.
func (r *Runtime) create(ctx context.Context, a *actor, cls *Class) error {
	if cls.Isolation == IsolationClass {
		return r.createShared(ctx, a, cls)
	}
	if err := r.reserveSlot(ctx, a); err != nil {
		return err
	}
	sbID, err := r.newSandbox(ctx, a, cls)
	if err != nil {
		return err
	}
	o, err := r.st.CreateObject(ctx, &store.Object{ObjectKey: a.key, Status: store.ObjectActive, SandboxID: sbID})
	if errors.Is(err, store.ErrAlreadyExists) {
		// Another node created it first: ours is surplus.
		r.destroySandbox(ctx, a.key.TenantID, sbID)
		if o, err = r.st.GetObject(ctx, a.key); err != nil {
			return err
		}
		return r.adopt(ctx, a, o)
	}
	if err != nil {
		r.destroySandbox(ctx, a.key.TenantID, sbID)
		return err
	}
	a.sandboxID, a.resync, a.sizes, a.total = sbID, false, map[string]int64{}, 0
	r.setState(a, stateActive)
	r.audit(ctx, a.key, "ObjectCreated", map[string]any{"sandbox_id": sbID, "storage_mode": cls.StorageMode})
	r.log.InfoContext(ctx, "object created", "object", subject(a.key), "tenant", a.key.TenantID, "sandbox", sbID)
	return nil
}

// wake brings a Hibernating object back: start its sandbox (the hook
// starts the server and injects the storage), then mark it Active.
func (r *Runtime) wake(ctx context.Context, a *actor, cls *Class) error {
	if err := r.reserveSlot(ctx, a); err != nil {
		return err
	}
	start := time.Now()
	warms := a.warms.Load()
	sbID := a.sandboxID
	sh, err := r.sharedOf(ctx, a.key.TenantID, sbID)
	if err != nil {
		return err
	}
	if sh == nil {
		_, err = r.sbx.Wake(ctx, a.key.TenantID, sbID)
	} else {
		// Hibernated in a shared sandbox while its class had isolation
		// "class": that sandbox is not its own.
		err = sandbox.ErrDestroyed
	}
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, sandbox.ErrDestroyed), elsewhere(err):
		// The sandbox was removed behind our back, or it is another
		// node's (the object was taken over): the storage is in the
		// store, so a new sandbox serves as well.
		if sh == nil {
			r.releaseApp(ctx, a.key.TenantID, sbID)
		}
		if sbID, err = r.newSandbox(ctx, a, cls); err != nil {
			return err
		}
	case err != nil:
		if ctx.Err() == nil {
			// Nothing half-started stays behind (as with a failed create):
			// the next wake starts a new sandbox with the class's app as it
			// is then — a bundle fixed by a new upload, say.
			r.destroySandbox(ctx, a.key.TenantID, sbID)
		}
		return r.sandboxErr(a, err)
	case a.warms.Load() == warms:
		// The sandbox was still running (the daemon died between persisting
		// the storage and stopping it): its server gets the persisted
		// storage, which is what hibernation saved.
		err := r.sbx.Client(ctx, a.key.TenantID, sbID, func(c *guest.Client) error {
			st, err := r.st.GetObjectStorage(ctx, a.key)
			if err != nil {
				return err
			}
			return restoreStorage(ctx, c.ObjectClient(), a.key, st)
		})
		if err != nil {
			return r.sandboxErr(a, err)
		}
	}
	if _, err := r.st.SetObjectActive(ctx, a.key, sbID); err != nil {
		return err
	}
	a.sandboxID, a.resync, a.sizes = sbID, false, nil
	r.setState(a, stateActive)
	d := time.Since(start)
	r.metrics.wake.WithLabelValues(cls.Name).Observe(d.Seconds())
	r.audit(ctx, a.key, "ObjectWoken", map[string]any{"sandbox_id": sbID, "wake_ms": d.Milliseconds()})
	r.log.InfoContext(ctx, "object woken", "object", subject(a.key), "tenant", a.key.TenantID, "duration", d)
	return nil
}

// createShared places a new class-mode object in a shared sandbox,
// gives the server its (empty) storage, then records the object.
func (r *Runtime) createShared(ctx context.Context, a *actor, cls *Class) error {
	sh, err := r.place(ctx, a, cls)
	if err != nil {
		return err
	}
	if err := r.ensureRunning(ctx, a, sh); err != nil {
		r.leave(ctx, a, sh)
		return err
	}
	// An id deleted before may have left storage in the server.
	if err := r.serveShared(ctx, a, sh, cls, true, nil); err != nil {
		r.leave(ctx, a, sh)
		return r.sandboxErr(a, err)
	}
	o, err := r.st.CreateObject(ctx, &store.Object{ObjectKey: a.key, Status: store.ObjectActive, SandboxID: sh.id})
	if errors.Is(err, store.ErrAlreadyExists) {
		r.leave(ctx, a, sh)
		if o, err = r.st.GetObject(ctx, a.key); err != nil {
			return err
		}
		return r.adopt(ctx, a, o)
	}
	if err != nil {
		r.leave(ctx, a, sh)
		return err
	}
	a.shared.Store(sh)
	a.sandboxID, a.resync, a.sizes, a.total = sh.id, false, map[string]int64{}, 0
	r.setState(a, stateActive)
	r.audit(ctx, a.key, "ObjectCreated", map[string]any{"sandbox_id": sh.id, "storage_mode": cls.StorageMode, "isolation": IsolationClass})
	r.log.InfoContext(ctx, "object created", "object", subject(a.key), "tenant", a.key.TenantID, "sandbox", sh.id, "isolation", IsolationClass)
	return nil
}

// wakeShared brings a Hibernating class-mode object back: a place in a
// shared sandbox (started if it is not running), its persisted storage
// injected, then Active. A running shared sandbox means no sandbox start.
func (r *Runtime) wakeShared(ctx context.Context, a *actor, cls *Class) error {
	start := time.Now()
	sh, err := r.place(ctx, a, cls)
	if err != nil {
		return err
	}
	if err := r.ensureRunning(ctx, a, sh); err != nil {
		r.leave(ctx, a, sh)
		return err
	}
	if err := r.serveShared(ctx, a, sh, cls, true, nil); err != nil {
		r.leave(ctx, a, sh)
		if errors.Is(err, sandbox.ErrDestroyed) || errors.Is(err, store.ErrNotFound) {
			r.dropShared(sh)
		}
		return r.sandboxErr(a, err)
	}
	if _, err := r.st.SetObjectActive(ctx, a.key, sh.id); err != nil {
		r.leave(ctx, a, sh)
		return err
	}
	if old := a.sandboxID; old != "" && old != sh.id {
		// Hibernated in a sandbox of its own while its class had isolation
		// "object": nothing runs there any more.
		if osh, err := r.sharedOf(ctx, a.key.TenantID, old); err == nil && osh == nil {
			r.destroySandbox(ctx, a.key.TenantID, old)
		}
	}
	a.shared.Store(sh)
	a.sandboxID, a.resync, a.sizes = sh.id, false, nil
	r.setState(a, stateActive)
	d := time.Since(start)
	r.metrics.wake.WithLabelValues(cls.Name).Observe(d.Seconds())
	r.audit(ctx, a.key, "ObjectWoken", map[string]any{"sandbox_id": sh.id, "wake_ms": d.Milliseconds(), "isolation": IsolationClass})
	r.log.InfoContext(ctx, "object woken", "object", subject(a.key), "tenant", a.key.TenantID, "sandbox", sh.id, "duration", d)
	return nil
}

// newSandbox creates and warms a sandbox for the object. On failure nothing
// is left behind.
func (r *Runtime) newSandbox(ctx context.Context, a *actor, cls *Class) (string, error) {
	in, err := r.sbx.Create(ctx, sandbox.CreateParams{
		TenantID: a.key.TenantID, Driver: cls.Driver, Image: cls.Image, SleepAfter: sandboxSleepAfter,
		Metadata:   map[string]string{MetadataKey: subject(a.key)},
		SessionKey: SandboxKey(a.key.Class, a.key.ID), Cold: true,
	})
	if err != nil {
		return "", unavailableErr(err, "create the sandbox of %s", subject(a.key))
	}
	if _, err := r.sbx.Wake(ctx, a.key.TenantID, in.ID); err != nil {
		r.destroySandbox(ctx, a.key.TenantID, in.ID)
		return "", unavailableErr(err, "start the sandbox of %s", subject(a.key))
	}
	return in.ID, nil
}

func (r *Runtime) destroySandbox(ctx context.Context, tenantID, id string) {
	ctx = context.WithoutCancel(ctx)
	if _, err := r.sbx.Destroy(ctx, tenantID, id); err != nil {
		r.log.WarnContext(ctx, "object: destroy sandbox", "sandbox", id, "err", err)
		return
	}
	r.releaseApp(ctx, tenantID, id)
}

// sandboxErr maps a failure to reach the object's sandbox to 503 (keeping
// a timeout or cancellation as it is).
func (r *Runtime) sandboxErr(a *actor, err error) error {
	if errors.Is(err, ErrSandboxUnavailable) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return unavailableErr(err, "the sandbox of %s", subject(a.key))
}

func unavailableErr(err error, format string, args ...any) error {
	return fmt.Errorf("%w: %s: %w", ErrSandboxUnavailable, fmt.Sprintf(format, args...), err)
}
