package object

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

type actorState int

const (
	stateUnknown     actorState = iota // not read from the store yet
	stateActive                        // Active, its sandbox ours to call
	stateHibernating                   // Hibernating: the next call wakes it
	stateGone                          // deleted or evicted from the map: look it up again
)

// actor is this node's in-memory companion of one object: its FIFO gate
// and what it knows of the object's lifecycle.
type actor struct {
	key  store.ObjectKey
	gate *gate

	// life guards the fields below; it is taken only by holders of the gate,
	// so it never waits long.
	life      sync.Mutex
	state     actorState
	sandboxID string
	// resync: the server's in-memory storage may differ from the store
	// (write-through after a restart, a timeout or a refused write): inject
	// the persisted storage before the next call.
	resync bool
	// sizes mirrors the persisted value sizes in write-through mode, so
	// limits are checked without reading the store (nil = load it).
	sizes map[string]int64
	total int64

	// shared is the shared sandbox of an Active object of a class-mode
	// class (nil: its own sandbox, or not Active); set before it becomes
	// Active and cleared after it stopped being so, so the active budget
	// counts the sandbox, not the object. epoch is the server epoch its
	// storage was injected at (see shared.go).
	shared atomic.Pointer[sharedSandbox]
	epoch  atomic.Int64

	lastCall atomic.Int64 // unix nanos on the runtime's clock
	touched  atomic.Int64 // last LastCallAt persisted
	warms    atomic.Int64 // how many times the sandbox hook started the server
}

var errActorGone = errors.New("object actor gone")

// actor returns the object's actor, creating it with the class's
// concurrency.
func (r *Runtime) actor(key store.ObjectKey, cls *Class) *actor {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.actors[key]
	if !ok {
		a = &actor{key: key, gate: newGate(cls.MaxConcurrency)}
		a.lastCall.Store(r.clock.Now().UnixNano())
		r.actors[key] = a
	}
	return a
}

func (r *Runtime) lookupActor(key store.ObjectKey) *actor {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.actors[key]
}

// forget drops a gone actor from the map (holders see stateGone and look
// the object up again).
func (r *Runtime) forget(a *actor) {
	r.mu.Lock()
	if r.actors[a.key] == a {
		delete(r.actors, a.key)
	}
	r.mu.Unlock()
}

// adopt takes the store's view of an object the actor did not know. The
// caller holds a.life.
func (r *Runtime) adopt(ctx context.Context, a *actor, o *store.Object) error {
	a.sandboxID = o.SandboxID
	if o.LastCallAt != nil {
		a.lastCall.Store(o.LastCallAt.UnixNano())
		a.touched.Store(o.LastCallAt.UnixNano())
	}
	if o.Status == store.ObjectActive && r.cfg.Cluster != nil {
		// Taken over from another node: its sandbox there is not this
		// node's to call, so it wakes here from the persisted storage.
		if _, err := r.sbx.Get(ctx, a.key.TenantID, o.SandboxID); elsewhere(err) {
			r.setState(a, stateHibernating)
			return nil
		}
	}
	if o.Status == store.ObjectActive {
		sh, err := r.sharedOf(ctx, a.key.TenantID, o.SandboxID)
		if err != nil {
			return err
		}
		if sh != nil {
			if !r.join(a, sh) {
				// Its shared sandbox stopped or is gone: whatever the server
				// held went with it, so it wakes from the persisted storage.
				r.setState(a, stateHibernating)
				return nil
			}
			// The server process (this epoch) holds its storage.
			a.epoch.Store(sh.epoch.Load())
			a.shared.Store(sh)
		}
		r.setState(a, stateActive)
		// The server may hold writes this runtime never made durable (it
		// died mid-call): in write-through mode the store is the truth.
		a.resync = true
		return nil
	}
	r.setState(a, stateHibernating)
	return nil
}

// setState changes the actor's state and the active budget and gauge. The
// caller holds a.life.
func (r *Runtime) setState(a *actor, s actorState) {
	if a.state == s {
		return
	}
	// A shared sandbox's objects are counted by their sandbox (shared.go).
	own := a.shared.Load() == nil
	r.mu.Lock()
	if a.state == stateActive {
		if own {
			r.active--
		}
		r.metrics.active.WithLabelValues(a.key.Class).Dec()
	}
	if s == stateActive {
		if own {
			r.active++
		}
		r.metrics.active.WithLabelValues(a.key.Class).Inc()
	}
	r.mu.Unlock()
	a.state = s
}

// reserveSlot makes room for one more sandbox (an object-mode object, or
// a shared sandbox starting): while the node is at max_active_objects it
// hibernates the least recently used idle unit — an object-mode object, or
// every idle object of a shared sandbox, which then stops. The
// reservation is taken by the caller (setState, or the shared sandbox's
// start); this only waits until there is room.
func (r *Runtime) reserveSlot(ctx context.Context, self *actor) error {
	// Wall time, not the injected clock: this bounds a real wait.
	deadline := time.Now().Add(r.lim.CallTimeout.D())
	for {
		if r.hasRoom() {
			return nil
		}
		for _, u := range r.evictionUnits(self) {
			r.evict(ctx, u)
			if r.hasRoom() {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return unavailable("max_active_objects (%d) sandboxes of objects are running and none is idle; try again later (durable_objects.max_active_objects)", r.lim.MaxActiveObjects)
		}
		t := time.NewTimer(5 * time.Millisecond)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func subject(k store.ObjectKey) string { return k.Class + "/" + k.ID }
