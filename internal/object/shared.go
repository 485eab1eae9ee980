package object

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Shared sandboxes (isolation = "class", issue 15). The objects of one
// tenant and one class-mode class live in a pool of sandboxes
// "dc-{class}-{n}", each running one server process that serves up to
// objects_per_sandbox of them; objects of different tenants never share
// one (the pool's key is the tenant and the class).
//
// An object is a member of a shared sandbox from the moment it is placed
// there (before its wake) until its hibernation, deletion or failed wake;
// the sandbox starts for its first member and stops, through the sandbox
// manager, when its last member leaves. A running shared sandbox counts as
// one against max_active_objects, however many members it has.
//
// Storage stays per object: a wake injects the object's persisted storage
// with POST /__storage (the id in the headers), a hibernation dumps it
// with GET /__storage (snapshot mode), persists it in one transaction and
// then forgets it with DELETE /__storage. The server's epoch counts the
// server processes started in the sandbox: an object whose storage was
// injected at an older epoch is not in the server's memory, so it is
// injected again (from the store) before its next call, and its dump is
// the persisted storage.

// SharedMetadataKey marks a shared sandbox with "class/n".
const SharedMetadataKey = "agentkernel.objects"

// SharedSandboxKey is the name (session key) of a class's n-th shared
// sandbox.
func SharedSandboxKey(class string, n int) string { return "dc-" + class + "-" + strconv.Itoa(n) }

// HeaderObjects is the GET /__health answer header of a server that serves
// many objects ("many"); a class-mode class refuses a server without it.
const HeaderObjects = "X-Agentkernel-Objects"

type sharedKey struct{ tenant, class string }

type sharedSandbox struct {
	key sharedKey
	id  string
	n   int

	// Guarded by Runtime.pools.mu.
	members map[*actor]struct{}
	running bool // started (or found running): counts 1 against max_active_objects
	dead    bool // destroyed or failed to start: out of the pool

	// life serialises starting and stopping the sandbox.
	life sync.Mutex
	// serve is held for reading by whoever relies on the server holding an
	// object's storage (the epoch check, the injection, the request), and
	// for writing by a restart of the server.
	serve sync.RWMutex
	epoch atomic.Int64
}

type sharedPools struct {
	mu     sync.Mutex
	loaded map[sharedKey]bool
	byKey  map[sharedKey][]*sharedSandbox
	byID   map[string]*sharedSandbox
}

func newSharedPools() sharedPools {
	return sharedPools{loaded: map[sharedKey]bool{}, byKey: map[sharedKey][]*sharedSandbox{}, byID: map[string]*sharedSandbox{}}
}

// sharedMeta reads a sandbox's shared-sandbox marker.
func sharedMeta(sb *store.Sandbox) (sharedKey, int, bool) {
	class, n, ok := strings.Cut(sb.Metadata[SharedMetadataKey], "/")
	if !ok || class == "" {
		return sharedKey{}, 0, false
	}
	i, err := strconv.Atoi(n)
	if err != nil {
		return sharedKey{}, 0, false
	}
	return sharedKey{sb.TenantID, class}, i, true
}

// registerLocked adds a shared sandbox to the pool. The caller holds
// pools.mu.
func (r *Runtime) registerLocked(k sharedKey, id string, n int, running bool) *sharedSandbox {
	sh := &sharedSandbox{key: k, id: id, n: n, members: map[*actor]struct{}{}, running: running}
	sh.epoch.Store(1)
	r.pools.byKey[k] = append(r.pools.byKey[k], sh)
	r.pools.byID[id] = sh
	if running {
		r.addActive(1)
	}
	return sh
}

// loadSharedLocked learns the shared sandboxes of a tenant's class from
// the sandbox table, once per process (the pool is this node's from then
// on). In a cluster the table holds every node's: only this node's are
// its pool (another node's it cannot call). The caller holds pools.mu.
func (r *Runtime) loadSharedLocked(ctx context.Context, k sharedKey) error {
	if r.pools.loaded[k] {
		return nil
	}
	list, err := r.sbx.List(ctx, k.tenant, "")
	if err != nil {
		return err
	}
	for _, in := range list {
		sk, n, ok := sharedMeta(in.Sandbox)
		if !ok || sk != k || r.pools.byID[in.ID] != nil || in.State == sandbox.StateDestroyed || r.otherNodes(in.Sandbox) {
			continue
		}
		r.registerLocked(k, in.ID, n, in.State != sandbox.StateCold)
	}
	r.pools.loaded[k] = true
	return nil
}

// sharedOf returns the shared sandbox with this id, or nil when the
// sandbox is not one (an object-mode sandbox, or none).
func (r *Runtime) sharedOf(ctx context.Context, tenantID, id string) (*sharedSandbox, error) {
	if id == "" {
		return nil, nil
	}
	if sh := r.sharedByID(id); sh != nil {
		return sh, nil
	}
	// Read outside pools.mu: object-mode wakes come through here.
	in, err := r.sbx.Get(ctx, tenantID, id)
	if errors.Is(err, store.ErrNotFound) || elsewhere(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	k, n, ok := sharedMeta(in.Sandbox)
	if !ok || in.State == sandbox.StateDestroyed {
		return nil, nil
	}
	r.pools.mu.Lock()
	defer r.pools.mu.Unlock()
	if err := r.loadSharedLocked(ctx, k); err != nil {
		return nil, err
	}
	if sh := r.pools.byID[id]; sh != nil {
		return sh, nil
	}
	return r.registerLocked(k, id, n, in.State != sandbox.StateCold), nil
}

// otherNodes says whether sb runs on another node of the cluster.
func (r *Runtime) otherNodes(sb *store.Sandbox) bool {
	return r.cfg.Cluster != nil && sb.Node != "" && sb.Node != r.cfg.Cluster.ID()
}

// sharedSessionKey names a new shared sandbox: SharedSandboxKey, with the
// node in a cluster, where each node has a pool of its own numbered from 0
// (the name keys the sandbox's workspace backups: two nodes' sandboxes
// must not share one).
func (r *Runtime) sharedSessionKey(class string, n int) string {
	if r.cfg.Cluster == nil {
		return SharedSandboxKey(class, n)
	}
	return SharedSandboxKey(class, n) + "@" + r.cfg.Cluster.ID()
}

func (r *Runtime) sharedByID(id string) *sharedSandbox {
	r.pools.mu.Lock()
	defer r.pools.mu.Unlock()
	return r.pools.byID[id]
}

// place makes a class-mode object a member of a shared sandbox of its
// tenant and class with room: a running one first (the fullest, so the
// others can stop), else a stopped one, else a new one. The caller holds
// a.life.
func (r *Runtime) place(ctx context.Context, a *actor, cls *Class) (*sharedSandbox, error) {
	k := sharedKey{a.key.TenantID, a.key.Class}
	r.pools.mu.Lock()
	defer r.pools.mu.Unlock()
	if err := r.loadSharedLocked(ctx, k); err != nil {
		return nil, err
	}
	var best *sharedSandbox
	used := map[int]bool{}
	for _, sh := range r.pools.byKey[k] {
		used[sh.n] = true
		if sh.dead || len(sh.members) >= cls.ObjectsPerSandbox {
			continue
		}
		if best == nil || sh.running && !best.running || sh.running == best.running && len(sh.members) > len(best.members) {
			best = sh
		}
	}
	if best == nil {
		n := 0
		for used[n] {
			n++
		}
		in, err := r.sbx.Create(ctx, sandbox.CreateParams{
			TenantID: k.tenant, Driver: cls.Driver, Image: cls.Image, SleepAfter: sandboxSleepAfter,
			Metadata:   map[string]string{SharedMetadataKey: k.class + "/" + strconv.Itoa(n)},
			SessionKey: r.sharedSessionKey(k.class, n), Cold: true,
		})
		if err != nil {
			return nil, unavailableErr(err, "create a shared sandbox of class %q", k.class)
		}
		best = r.registerLocked(k, in.ID, n, false)
		r.log.InfoContext(ctx, "object: shared sandbox created", "class", k.class, "tenant", k.tenant, "sandbox", in.ID, "n", n)
	}
	best.members[a] = struct{}{}
	return best, nil
}

// join makes a a member of sh (an object found Active in it), unless sh
// is out of the pool or stopped.
func (r *Runtime) join(a *actor, sh *sharedSandbox) bool {
	r.pools.mu.Lock()
	defer r.pools.mu.Unlock()
	if sh.dead || !sh.running {
		return false
	}
	sh.members[a] = struct{}{}
	return true
}

// leave takes a out of sh; the last member out stops the sandbox.
func (r *Runtime) leave(ctx context.Context, a *actor, sh *sharedSandbox) {
	r.pools.mu.Lock()
	delete(sh.members, a)
	empty := len(sh.members) == 0 && sh.running && !sh.dead
	r.pools.mu.Unlock()
	if empty {
		r.stopShared(ctx, sh)
	}
}

// dropShared takes a destroyed (or broken) sandbox out of the pool.
func (r *Runtime) dropShared(sh *sharedSandbox) {
	r.pools.mu.Lock()
	defer r.pools.mu.Unlock()
	if sh.dead {
		return
	}
	sh.dead = true
	if r.pools.byID[sh.id] == sh {
		delete(r.pools.byID, sh.id)
	}
	list := r.pools.byKey[sh.key]
	for i, x := range list {
		if x == sh {
			r.pools.byKey[sh.key] = append(list[:i:i], list[i+1:]...)
			break
		}
	}
	if sh.running {
		sh.running = false
		r.addActive(-1)
	}
}

// ensureRunning starts a shared sandbox that is not running (its server
// starts through the sandbox hook, holding no object yet). A sandbox that
// fails to start is destroyed and leaves the pool: nothing half-started
// stays behind. The caller holds a.life and is a member of sh.
func (r *Runtime) ensureRunning(ctx context.Context, a *actor, sh *sharedSandbox) error {
	r.pools.mu.Lock()
	running := sh.running
	r.pools.mu.Unlock()
	if !running {
		// Before sh.life: making room may stop other shared sandboxes.
		if err := r.reserveSlot(ctx, a); err != nil {
			return err
		}
	}
	sh.life.Lock()
	defer sh.life.Unlock()
	r.pools.mu.Lock()
	running, dead := sh.running, sh.dead
	r.pools.mu.Unlock()
	switch {
	case dead:
		return unavailable("the shared sandbox %s of class %q did not start or was destroyed; try again", sh.id, sh.key.class)
	case running:
		return nil
	}
	if _, err := r.sbx.Wake(ctx, sh.key.tenant, sh.id); err != nil {
		if ctx.Err() == nil || errors.Is(err, store.ErrNotFound) || errors.Is(err, sandbox.ErrDestroyed) {
			r.dropShared(sh)
			r.destroySandbox(ctx, sh.key.tenant, sh.id)
		}
		return unavailableErr(err, "start the shared sandbox %s of class %q", sh.id, sh.key.class)
	}
	r.pools.mu.Lock()
	sh.running = true
	r.addActive(1)
	r.pools.mu.Unlock()
	r.log.InfoContext(ctx, "object: shared sandbox started", "class", sh.key.class, "tenant", sh.key.tenant, "sandbox", sh.id)
	return nil
}

// stopShared stops a running shared sandbox without members.
func (r *Runtime) stopShared(ctx context.Context, sh *sharedSandbox) {
	ctx = context.WithoutCancel(ctx)
	sh.life.Lock()
	defer sh.life.Unlock()
	r.pools.mu.Lock()
	stop := len(sh.members) == 0 && sh.running && !sh.dead
	r.pools.mu.Unlock()
	if !stop {
		return
	}
	if _, err := r.sbx.Hibernate(ctx, sh.key.tenant, sh.id); err != nil {
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, sandbox.ErrDestroyed) {
			r.dropShared(sh)
			r.releaseApp(ctx, sh.key.tenant, sh.id)
			return
		}
		// Still running and counted: the idle pass tries again.
		r.log.WarnContext(ctx, "object: shared sandbox without objects did not stop", "sandbox", sh.id, "err", err)
		return
	}
	r.releaseApp(ctx, sh.key.tenant, sh.id)
	r.pools.mu.Lock()
	if sh.running {
		sh.running = false
		r.addActive(-1)
	}
	r.pools.mu.Unlock()
	r.log.InfoContext(ctx, "object: shared sandbox stopped", "class", sh.key.class, "tenant", sh.key.tenant, "sandbox", sh.id)
}

// stopEmptyShared stops running shared sandboxes left without members (a
// stop that failed, or found so after a restart). The idle pass runs it.
func (r *Runtime) stopEmptyShared(ctx context.Context) {
	r.pools.mu.Lock()
	var empty []*sharedSandbox
	for _, sh := range r.pools.byID {
		if sh.running && !sh.dead && len(sh.members) == 0 {
			empty = append(empty, sh)
		}
	}
	r.pools.mu.Unlock()
	for _, sh := range empty {
		r.stopShared(ctx, sh)
	}
}

// serveShared runs fn (nil: nothing) against the server of sh with a's
// storage in it: injected first when the server does not hold it (another
// epoch) or force says so. When nothing listens (the server died: neither
// the injection nor the method ran) the server is started again, once.
func (r *Runtime) serveShared(ctx context.Context, a *actor, sh *sharedSandbox, cls *Class, force bool, fn func(hc *http.Client) error) error {
	return r.sbx.Client(ctx, sh.key.tenant, sh.id, func(c *guest.Client) error {
		hc := c.ObjectClient()
		for attempt := 0; ; attempt++ {
			sh.serve.RLock()
			ep := sh.epoch.Load()
			var err error
			if force || a.epoch.Load() != ep {
				err = r.injectStorage(ctx, a, hc)
				if err == nil {
					a.epoch.Store(ep)
					force = false
				}
			}
			if err == nil && fn != nil {
				err = fn(hc)
			}
			sh.serve.RUnlock()
			if !errors.Is(err, errNotListening) || attempt > 0 {
				return err
			}
			r.log.WarnContext(ctx, "object: shared server not listening; restarting it", "sandbox", sh.id, "object", subject(a.key))
			if err := r.restartShared(ctx, c, sh, cls, ep); err != nil {
				return unavailableErr(err, "restart the server of shared sandbox %s", sh.id)
			}
		}
	})
}

// injectStorage gives the server a's persisted storage (POST /__storage).
func (r *Runtime) injectStorage(ctx context.Context, a *actor, hc *http.Client) error {
	st, err := r.st.GetObjectStorage(ctx, a.key)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	return restoreStorage(ctx, hc, a.key, st)
}

// restartShared starts the server of a running shared sandbox again,
// unless another caller did since epoch seen.
func (r *Runtime) restartShared(ctx context.Context, c *guest.Client, sh *sharedSandbox, cls *Class, seen int64) error {
	sh.serve.Lock()
	defer sh.serve.Unlock()
	if sh.epoch.Load() != seen {
		return nil
	}
	k := store.ObjectKey{TenantID: sh.key.tenant, Class: sh.key.class}
	app, err := r.hasApp(ctx, cls, k, sh.id)
	if err == nil {
		err = r.startServer(ctx, c, cls, k, sh.key.tenant, app, true)
	}
	if err != nil {
		return err
	}
	sh.epoch.Add(1)
	return nil
}

// forgetShared drops a's storage from the server's memory (DELETE
// /__storage), best effort: a server that still holds it gets the
// persisted storage injected before the object's next call there anyway.
func (r *Runtime) forgetShared(ctx context.Context, a *actor, sh *sharedSandbox) {
	ctx = context.WithoutCancel(ctx)
	err := r.sbx.Client(ctx, sh.key.tenant, sh.id, func(c *guest.Client) error {
		return forgetStorage(ctx, c.ObjectClient(), a.key)
	})
	if err != nil && !errors.Is(err, errNotListening) {
		r.log.WarnContext(ctx, "object: DELETE /__storage failed", "object", subject(a.key), "sandbox", sh.id, "err", err)
	}
}

// evictionUnit is what max_active_objects counts: an object-mode object
// or a running shared sandbox (last used when its latest member was).
type evictionUnit struct {
	last int64
	a    *actor
	sh   *sharedSandbox
}

func (r *Runtime) evictionUnits(self *actor) []evictionUnit {
	r.mu.Lock()
	units := make([]evictionUnit, 0, len(r.actors))
	for _, a := range r.actors {
		if a != self && a.shared.Load() == nil {
			units = append(units, evictionUnit{last: a.lastCall.Load(), a: a})
		}
	}
	r.mu.Unlock()
	r.pools.mu.Lock()
	for _, sh := range r.pools.byID {
		if !sh.running || sh.dead {
			continue
		}
		if _, mine := sh.members[self]; mine {
			continue
		}
		var last int64
		for m := range sh.members {
			last = max(last, m.lastCall.Load())
		}
		units = append(units, evictionUnit{last: last, sh: sh})
	}
	r.pools.mu.Unlock()
	sort.Slice(units, func(i, j int) bool { return units[i].last < units[j].last })
	return units
}

// evict hibernates a unit's idle objects (a busy one is skipped); a
// shared sandbox stops once its last member left.
func (r *Runtime) evict(ctx context.Context, u evictionUnit) {
	if u.a != nil {
		r.evictActor(ctx, u.a)
		return
	}
	r.pools.mu.Lock()
	members := make([]*actor, 0, len(u.sh.members))
	for m := range u.sh.members {
		members = append(members, m)
	}
	r.pools.mu.Unlock()
	if len(members) == 0 {
		r.stopShared(ctx, u.sh)
		return
	}
	for _, m := range members {
		r.evictActor(ctx, m)
	}
}

func (r *Runtime) evictActor(ctx context.Context, c *actor) {
	if !c.gate.tryAcquire(c.gate.size) {
		return
	}
	defer c.gate.release(c.gate.size)
	c.life.Lock()
	isActive := c.state == stateActive
	c.life.Unlock()
	if !isActive {
		return
	}
	if err := r.hibernateHeld(ctx, c, "lru"); err != nil {
		r.log.WarnContext(ctx, "object: lru hibernation failed", "object", subject(c.key), "err", err)
	}
}

func (r *Runtime) addActive(d int) {
	r.mu.Lock()
	r.active += d
	r.mu.Unlock()
}

func (r *Runtime) hasRoom() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return int64(r.active) < r.lim.MaxActiveObjects
}

// errSingleObjectServer refuses, for a class-mode class, a server that
// does not say it serves many objects: it would mix their storage.
func errSingleObjectServer(cls *Class) error {
	return fmt.Errorf("class %q has isolation \"class\" (its objects share a server process), but its server answered GET /__health "+
		"without %s: many, so it keeps one storage for every object and would mix them. Use a helper library that serves many objects "+
		"(objectserver, agentkernel_object.py or agentkernel-object.js as shipped with this agentkernel; `agentkernel object init` copies them) "+
		"or define the class with isolation \"object\"", cls.Name, HeaderObjects)
}
