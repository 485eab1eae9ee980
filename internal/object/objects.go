package object

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Info is an object's record with its storage.
type Info struct {
	*store.Object
	Storage map[string]json.RawMessage
	// StorageSource is "live" (dumped from the running server) or
	// "persisted" (the store's copy).
	StorageSource string
	StorageMode   string
}

// Get returns an object with its storage: for an Active snapshot-mode
// object the live dump (queued like a call), otherwise the persisted
// storage, which in write-through mode is the live storage too.
func (r *Runtime) Get(ctx context.Context, key store.ObjectKey) (*Info, error) {
	o, err := r.st.GetObject(ctx, key)
	if err != nil {
		return nil, err
	}
	in := &Info{Object: o, StorageSource: "persisted", StorageMode: ModeSnapshot}
	cls, cerr := r.Class(ctx, key.TenantID, key.Class)
	if cerr == nil {
		in.StorageMode = cls.StorageMode
	}
	if a := r.lookupActor(key); a != nil && o.Status == store.ObjectActive && in.StorageMode == ModeSnapshot {
		if err := a.gate.acquire(ctx, 1); err != nil {
			return nil, err
		}
		a.life.Lock()
		if a.state == stateActive {
			if st, err := r.dump(ctx, a); err == nil {
				in.Storage, in.StorageSource = st, "live"
			} else {
				r.log.WarnContext(ctx, "object: live storage dump failed; answering the persisted storage", "object", subject(key), "err", err)
			}
		}
		a.life.Unlock()
		a.gate.release(1)
	}
	if in.Storage == nil {
		st, err := r.st.GetObjectStorage(ctx, key)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if st == nil {
			st = map[string]json.RawMessage{}
		}
		in.Storage = st
	}
	return in, nil
}

// ListParams filters a listing.
type ListParams = store.ListObjectsParams

// List lists a tenant's objects (without storage).
func (r *Runtime) List(ctx context.Context, p ListParams) ([]*store.Object, error) {
	if p.Limit <= 0 || p.Limit > 1000 {
		p.Limit = 1000
	}
	return r.st.ListObjects(ctx, p)
}

// Delete removes an object, its storage and alarms, and destroys its
// sandbox; queued calls run first, later calls create a new object.
func (r *Runtime) Delete(ctx context.Context, key store.ObjectKey) error {
	return r.exclusive(ctx, key, func(a *actor) error {
		a.life.Lock()
		defer a.life.Unlock()
		if err := r.st.DeleteObject(ctx, key); err != nil {
			return err
		}
		r.setState(a, stateGone)
		r.forget(a)
		if sh := a.shared.Load(); sh != nil {
			// Its shared sandbox serves others: the server forgets it, and
			// the sandbox stops if it was the last.
			r.forgetShared(ctx, a, sh)
			a.shared.Store(nil)
			r.leave(ctx, a, sh)
		} else if a.sandboxID != "" {
			sh, err := r.sharedOf(ctx, key.TenantID, a.sandboxID)
			if err != nil {
				r.log.WarnContext(ctx, "object: deleted; its sandbox was not looked up", "object", subject(key), "sandbox", a.sandboxID, "err", err)
			} else if sh == nil {
				r.destroySandbox(ctx, key.TenantID, a.sandboxID)
			}
		}
		if r.cfg.Cluster != nil {
			if err := r.cfg.Cluster.Release(ctx, store.ObjectResource(key)); err != nil {
				r.log.WarnContext(ctx, "object: deleted; its lease stays until it lapses", "object", subject(key), "err", err)
			}
		}
		r.audit(ctx, key, "ObjectDeleted", map[string]any{"sandbox_id": a.sandboxID})
		r.log.InfoContext(ctx, "object deleted", "object", subject(key), "tenant", key.TenantID)
		return nil
	})
}
