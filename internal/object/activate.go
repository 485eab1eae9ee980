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
		r.adopt(a, o)
	}
	if a.state == stateHibernating {
		if err := r.wake(ctx, a, cls); err != nil {
			return "", err
		}
	}
	if a.resync && cls.StorageMode == ModeWriteThrough {
		err := r.sbx.Client(ctx, a.key.TenantID, a.sandboxID, func(c *guest.Client) error {
			st, err := r.st.GetObjectStorage(ctx, a.key)
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
			return restoreStorage(ctx, c.ObjectClient(), st)
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
		r.adopt(a, o)
		return nil
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
	_, err := r.sbx.Wake(ctx, a.key.TenantID, sbID)
	switch {
	case errors.Is(err, store.ErrNotFound), errors.Is(err, sandbox.ErrDestroyed):
		// The sandbox was removed behind our back: the storage is in the
		// store, so a new sandbox serves as well.
		r.releaseApp(ctx, a.key.TenantID, sbID)
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
			return restoreStorage(ctx, c.ObjectClient(), st)
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
