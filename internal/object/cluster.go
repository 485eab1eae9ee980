package object

import (
	"context"
	"errors"
	"strings"

	"github.com/agentkernel/agentkernel/internal/cluster"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Several daemons (issue 16). With Config.Cluster set, an object is served
// by the node that holds its lease (store.ObjectResource): the API asks
// Route before it serves a request and forwards it when another node owns
// the object, the alarm poller fires only the alarms of objects this node
// owns or takes, and the store refuses the writes of a node whose lease was
// taken over (the daemon gives the runtime a fenced store). An object taken
// over from a dead or cut-off node wakes here from its persisted storage
// in a sandbox of this node; the node that lost it forgets it and destroys
// its sandbox when it learns (lost).

// Route says where the object is served. Without a cluster it is always
// here. When this node just took the object over, what it remembered of
// it is dropped first, so the next call reads the store.
func (r *Runtime) Route(ctx context.Context, key store.ObjectKey) (cluster.Route, error) {
	if r.cfg.Cluster == nil {
		return cluster.Route{Local: true}, nil
	}
	rt, err := r.cfg.Cluster.Route(ctx, store.ObjectResource(key))
	if err == nil && rt.Local && rt.Fresh {
		r.reset(ctx, key, false)
	}
	return rt, err
}

// owns says whether this node may serve the object now.
func (r *Runtime) owns(ctx context.Context, key store.ObjectKey) bool {
	if r.cfg.Cluster == nil {
		return true
	}
	rt, err := r.Route(ctx, key)
	return err == nil && rt.Local
}

// Lost is told (by the cluster node) that another node took a resource
// over: an object's actor is dropped and its sandbox here destroyed, as
// the new owner serves it from the persisted storage.
func (r *Runtime) Lost(resource string) {
	rest, ok := strings.CutPrefix(resource, "object/")
	if !ok {
		return
	}
	parts := strings.SplitN(rest, "/", 3)
	if len(parts) != 3 {
		return
	}
	r.reset(r.ctx, store.ObjectKey{TenantID: parts[0], Class: parts[1], ID: parts[2]}, true)
}

// reset forgets what this node knows of an object: its actor goes (calls
// holding it look the object up again) and, when destroy is set, its
// sandbox on this node is destroyed (its storage belongs to the new owner).
func (r *Runtime) reset(ctx context.Context, key store.ObjectKey, destroy bool) {
	a := r.lookupActor(key)
	if a == nil {
		return
	}
	a.life.Lock()
	sbID, sh := a.sandboxID, a.shared.Load()
	if sh != nil {
		a.shared.Store(nil)
		r.leave(ctx, a, sh)
	}
	r.setState(a, stateGone)
	r.forget(a)
	a.life.Unlock()
	if destroy && sh == nil && sbID != "" {
		if in, err := r.sbx.Get(ctx, key.TenantID, sbID); err == nil && in.State != sandbox.StateDestroyed {
			r.destroySandbox(ctx, key.TenantID, sbID)
		}
	}
	r.log.InfoContext(ctx, "object: another node owns it now; forgotten here", "object", subject(key), "tenant", key.TenantID)
}

// elsewhere says whether a sandbox runs on another node.
func elsewhere(err error) bool { return errors.Is(err, sandbox.ErrElsewhere) }
