package sandbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// The warm pool keeps, per shape of sandbox (driver, image, limits,
// network), a few sandboxes started ahead of need: namespaces, mounts,
// cgroups and the guest up and answering, with nothing of a tenant in them
// — an empty workspace and runtime dir of their own, the environment every
// sandbox of the shape gets, no extra mounts (those come at assignment). A wake takes one and assigns
// it (assign): the sandbox's workspace and runtime dir are moved, on the
// host, into the directories the pooled sandbox has mounted (renames of
// their entries, then of the directories, decided by the daemon alone:
// nothing inside a sandbox names a host path), its run dir is renamed to
// the sandbox's, the driver adopts the instance under the sandbox's id, and
// the guest gets the sandbox's environment (POST /assign). A pooled
// sandbox serves one sandbox and is never returned: it stops with it.
//
// A pooled guest holds the read end of a pipe whose write end the manager
// keeps until assignment; when the daemon dies (or lets it go) the guest
// ends, so no unassigned sandbox outlives the daemon. An assignment cut
// short by a crash is finished or undone at the next start (sweepPool,
// from a journal in the slot's directory).

// MaxPoolShapes bounds how many shapes have a pool at once: with WarmPool
// sandboxes each, at most WarmPool × MaxPoolShapes sandboxes wait. A
// sandbox of another shape starts fresh.
const MaxPoolShapes = 8

// poolDirName is the pool's directory in DataDir (no sandbox id starts
// with a dot).
const poolDirName = ".pool"

// runTrashPrefix names, in RunDir, an earlier instance's run dir moved out
// of the way by an assignment, until the refill goroutine removes it.
const runTrashPrefix = ".old-"

// Files of a slot's directory, DataDir/.pool/<slot>.
const (
	slotHandleFile = "handle" // the instance's Handle (JSON), for the sweep
	slotAssignFile = "assign" // symlink to "<sandbox id> <generation>": an assignment began
)

// poolKey is a shape of sandbox.
type poolKey struct {
	Driver, Image, Network string
	Limits                 Limits
}

// poolSlot is a pooled instance waiting for its sandbox.
type poolSlot struct {
	id     string
	key    poolKey
	handle *Handle
	// hold is the write end of the pool pipe: closing it ends the guest
	// unless it was assigned.
	hold *os.File
	// client is the probe's client, its connection (handshake done) kept
	// for the assignment; it dials the instance named by cur, which the
	// assignment moves to the adopted handle.
	client *guest.Client
	cur    atomic.Pointer[Handle]
}

// shapePool is one shape's ready slots and the goroutine refilling them.
type shapePool struct {
	key   poolKey
	ready []*poolSlot
	kick  chan struct{}
	// trash are slot directories of assigned slots, for the refill
	// goroutine to remove (off the wake's path).
	trash []string
}

type warmPool struct {
	size int

	mu     sync.Mutex
	shapes map[poolKey]*shapePool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed bool

	sweepOnce sync.Once
	sweepErr  error
}

func (m *Manager) poolDir() string            { return filepath.Join(m.cfg.DataDir, poolDirName) }
func (m *Manager) slotDir(slot string) string { return filepath.Join(m.poolDir(), slot) }

// poolKeyOf is sb's shape, and whether sandboxes of it can be pooled.
func (m *Manager) poolKeyOf(sb *store.Sandbox) (poolKey, bool) {
	k := poolKey{Driver: sb.Driver, Image: sb.Image, Network: sb.Network, Limits: m.limitsOf(sb)}
	if m.pool.size <= 0 {
		return k, false
	}
	if _, ok := m.cfg.Drivers[sb.Driver].(Pooler); !ok {
		return k, false
	}
	if sb.Network == NetworkEgress && m.cfg.Egress == nil {
		return k, false
	}
	return k, true
}

// PoolStats says how many pooled sandboxes wait, per shape (tests,
// metrics).
func (m *Manager) PoolStats() (shapes, ready int) {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	for _, sp := range m.pool.shapes {
		ready += len(sp.ready)
	}
	return len(m.pool.shapes), ready
}

// WaitPool waits until every shape's pool is full (tests, benchmarks).
func (m *Manager) WaitPool(ctx context.Context) error {
	for {
		m.pool.mu.Lock()
		full := true
		for _, sp := range m.pool.shapes {
			if len(sp.ready) < m.pool.size {
				full = false
			}
		}
		m.pool.mu.Unlock()
		if full {
			return nil
		}
		if err := sleepCtx(ctx, time.Millisecond); err != nil {
			return err
		}
	}
}

// startPool fills the pool of the default shape (Start calls it); other
// shapes get a pool at their first wake.
func (m *Manager) startPool(ctx context.Context) {
	if m.pool.size <= 0 {
		return
	}
	p := CreateParams{}
	limits, err := m.Resolve(ctx, &p)
	if err != nil {
		m.log.WarnContext(ctx, "sandbox pool: the default shape cannot be pooled", "err", err)
		return
	}
	sb := &store.Sandbox{Driver: p.Driver, Image: p.Image, Network: p.Network}
	sb.Limits, _ = json.Marshal(limits)
	if k, ok := m.poolKeyOf(sb); ok {
		m.pool.mu.Lock()
		m.shapeLocked(k)
		m.pool.mu.Unlock()
	}
}

// take returns a ready slot of shape k, or nil (then the shape's pool is
// created if it has none, so the next wake finds one).
func (m *Manager) take(k poolKey) *poolSlot {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	sp := m.shapeLocked(k)
	if sp == nil || len(sp.ready) == 0 {
		return nil
	}
	s := sp.ready[0]
	sp.ready = sp.ready[1:]
	return s
}

// refillAfter has k's pool refilled, and trash (an assigned slot's
// directory, an earlier instance's run dir; "" for none) removed, by its
// refill goroutine. A wake calls
// it once done, so that starting the next pooled sandbox does not compete
// with the wake for the CPU.
func (m *Manager) refillAfter(k poolKey, trash ...string) {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	sp := m.pool.shapes[k]
	for _, t := range trash {
		if t == "" {
			continue
		}
		if sp == nil {
			_ = os.RemoveAll(t)
		} else {
			sp.trash = append(sp.trash, t)
		}
	}
	if sp == nil {
		return
	}
	select {
	case sp.kick <- struct{}{}:
	default:
	}
}

// shapeLocked returns k's pool, creating it (and its refill goroutine)
// when there is room; nil when closed or at MaxPoolShapes.
func (m *Manager) shapeLocked(k poolKey) *shapePool {
	p := &m.pool
	if sp, ok := p.shapes[k]; ok {
		return sp
	}
	if p.closed || len(p.shapes) >= MaxPoolShapes {
		return nil
	}
	if p.ctx == nil {
		p.ctx, p.cancel = context.WithCancel(context.Background())
	}
	sp := &shapePool{key: k, kick: make(chan struct{}, 1)}
	p.shapes[k] = sp
	p.wg.Add(1)
	go m.refill(p.ctx, sp)
	return sp
}

// refill keeps sp at size: one sandbox started at a time, in the
// background; after a failure it waits (1 s, doubling up to a minute).
func (m *Manager) refill(ctx context.Context, sp *shapePool) {
	defer m.pool.wg.Done()
	if err := m.sweepPoolOnce(ctx); err != nil {
		m.log.WarnContext(ctx, "sandbox pool: leftovers of an earlier run not cleaned up; pooling stays off", "err", err)
		return
	}
	backoff := time.Second
	for {
		m.pool.mu.Lock()
		need := len(sp.ready) < m.pool.size && !m.pool.closed
		trash := sp.trash
		sp.trash = nil
		m.pool.mu.Unlock()
		for _, dir := range trash {
			_ = os.RemoveAll(dir)
		}
		if !need {
			select {
			case <-ctx.Done():
				return
			case <-sp.kick:
				continue
			}
		}
		s, err := m.startSlot(ctx, sp.key)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			m.log.WarnContext(ctx, "sandbox pool: could not start a pooled sandbox", "driver", sp.key.Driver, "image", sp.key.Image, "err", err, "retry_in", backoff)
			select {
			case <-ctx.Done():
				return
			case <-time.After(backoff):
			}
			backoff = min(backoff*2, time.Minute)
			continue
		}
		backoff = time.Second
		m.pool.mu.Lock()
		if m.pool.closed {
			m.pool.mu.Unlock()
			m.dropSlot(s)
			return
		}
		sp.ready = append(sp.ready, s)
		m.pool.mu.Unlock()
	}
}

// startSlot starts one pooled sandbox of shape k and waits until its guest
// runs commands.
func (m *Manager) startSlot(ctx context.Context, k poolKey) (s *poolSlot, err error) {
	d := m.cfg.Drivers[k.Driver]
	s = &poolSlot{id: ids.New("wrm"), key: k}
	dir := m.slotDir(s.id)
	run := m.runDir(s.id)
	defer func() {
		if err != nil {
			m.dropSlot(s)
		}
	}()
	if err := os.MkdirAll(m.poolDir(), 0o700); err != nil {
		return s, err
	}
	if err := os.Mkdir(dir, 0o700); err != nil {
		return s, err
	}
	for _, sub := range []string{"workspace", "runtime"} {
		if err := os.Mkdir(filepath.Join(dir, sub), 0o755); err != nil {
			return s, err
		}
	}
	if err := os.Mkdir(run, 0o700); err != nil {
		return s, err
	}
	egressDir := ""
	if k.Network == NetworkEgress {
		// The proxy's CA now; the sandbox's own socket at assignment
		// (openEgress), in this same directory once renamed.
		egressDir = filepath.Join(run, egressDirName)
		if err := os.Mkdir(egressDir, 0o755); err != nil {
			return s, err
		}
		if err := writeFileAtomic(filepath.Join(egressDir, egressCAName), m.cfg.Egress.CACertPEM(), 0o644); err != nil {
			return s, err
		}
	}
	r, w, err := os.Pipe()
	if err != nil {
		return s, err
	}
	s.hold = w
	secret := guest.NewSecret()
	h, err := d.Start(ctx, Spec{
		ID: s.id, Image: k.Image, Network: k.Network, Limits: k.Limits,
		WorkspaceDir: filepath.Join(dir, "workspace"), RuntimeDir: filepath.Join(dir, "runtime"),
		RunDir: run, GuestBinary: m.cfg.GuestBinary, EgressDir: egressDir,
		Secret: secret, PoolPipe: r,
	})
	r.Close()
	if err != nil {
		return s, err
	}
	h.Secret = secret
	s.handle = h
	raw, _ := json.Marshal(h)
	if err := writeFileAtomic(filepath.Join(dir, slotHandleFile), raw, 0o600); err != nil {
		return s, err
	}
	s.cur.Store(h)
	dial := func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, s.cur.Load()) }
	s.client = guest.NewClient(dial, secret)
	if err := probeGuest(ctx, dial, s.client, k.Driver, s.id); err != nil {
		return s, fmt.Errorf("pooled sandbox %s: %w", s.id, err)
	}
	return s, nil
}

// dropSlot ends a pooled sandbox that was never assigned and removes its
// directories.
func (m *Manager) dropSlot(s *poolSlot) {
	if s.client != nil {
		s.client.Close()
	}
	if s.hold != nil {
		s.hold.Close()
	}
	if s.handle != nil {
		if err := m.cfg.Drivers[s.key.Driver].Destroy(context.Background(), s.handle); err != nil {
			m.log.Warn("sandbox pool: destroy a pooled sandbox", "slot", s.id, "err", err)
		}
	}
	_ = os.RemoveAll(m.slotDir(s.id))
	_ = os.RemoveAll(m.runDir(s.id))
}

// closePool ends every waiting sandbox and the refill goroutines.
func (m *Manager) closePool() {
	p := &m.pool
	p.mu.Lock()
	p.closed = true
	cancel := p.cancel
	var slots []*poolSlot
	var trash []string
	for _, sp := range p.shapes {
		slots = append(slots, sp.ready...)
		sp.ready = nil
		trash = append(trash, sp.trash...)
		sp.trash = nil
	}
	p.mu.Unlock()
	for _, dir := range trash {
		_ = os.RemoveAll(dir)
	}
	if cancel != nil {
		cancel()
	}
	p.wg.Wait()
	for _, s := range slots {
		m.dropSlot(s)
	}
}

// assign gives the pooled slot s to sandbox sb (the caller holds e.mu for
// writing; the workspace is restored and no instance of sb runs). On
// error the slot is gone and sb's directories are where they were, so the
// caller can start a fresh instance.
func (m *Manager) assign(ctx context.Context, e *entry, sb *store.Sandbox, s *poolSlot, mounts []Mount, env map[string]string) (_ *store.Sandbox, err error) {
	d := m.cfg.Drivers[s.key.Driver]
	pooler := d.(Pooler)
	dir := m.slotDir(s.id)
	gen := m.readStamp(sb.ID)
	handed := false // the instance is sb's: on failure it is destroyed as such
	oldRun := ""
	var h *Handle
	died := false // a fault stopped the assignment as a crash would
	crash := func(step string) error {
		if f := m.faults(); f != nil && f.PoolAssign != nil {
			if err := f.PoolAssign(sb.ID, step); err != nil {
				died = true
				return &poolCrash{err}
			}
		}
		return nil
	}
	defer func() {
		if err == nil || died {
			return
		}
		m.refillAfter(s.key, oldRun)
		e.dropClient()
		if handed && h != nil {
			s.hold.Close()
			_ = d.Destroy(context.WithoutCancel(ctx), h)
			_ = os.RemoveAll(dir)
			return
		}
		if uerr := m.unassignDirs(dir, sb.ID, gen); uerr != nil {
			// The sandbox's files may still be in the slot's directories:
			// keep them, with the journal, for the next start's sweep, and
			// start nothing over a workspace that is not whole.
			m.log.ErrorContext(ctx, "sandbox pool: could not put a sandbox's workspace back after a failed assignment", "sandbox", sb.ID, "slot", s.id, "err", uerr)
			s.hold.Close()
			_ = d.Destroy(context.WithoutCancel(ctx), s.handle)
			err = &poolStuck{fmt.Errorf("%w; putting its files back: %w", err, uerr)}
			return
		}
		m.dropSlot(s)
	}()
	// The journal first: a crash from here on is finished or undone at
	// the next start (sweepPool).
	// A symlink's target is its content: one atomic system call.
	if err := os.Symlink(sb.ID+" "+strconv.FormatInt(gen, 10), filepath.Join(dir, slotAssignFile)); err != nil {
		return nil, err
	}
	if err := crash("journal"); err != nil {
		return nil, err
	}
	for _, sub := range []struct{ name, from, to string }{
		{"workspace", filepath.Join(dir, "workspace"), m.workspaceDir(sb.ID)},
		{"runtime", filepath.Join(dir, "runtime"), m.runtimeDir(sb.ID)},
	} {
		if err := moveDirInto(sub.to, sub.from); err != nil {
			return nil, fmt.Errorf("sandbox %s: move its files into pooled sandbox %s: %w", sb.ID, s.id, err)
		}
		if err := crash(sub.name); err != nil {
			return nil, err
		}
	}
	// The workspace is another directory now: stamp it, with the
	// generation the warm-up goes to (it then writes no stamp of its own).
	// Stamping ahead of the record is what a daemon that died between
	// stamping and recording leaves, which a wake already accepts.
	next := max(sb.Generation, gen) + 1
	if err := m.writeStamp(sb.ID, next); err != nil {
		return nil, err
	}
	run := m.runDir(sb.ID)
	// An earlier instance's run dir goes out of the way in one rename; the
	// refill goroutine removes it.
	if _, err := os.Lstat(run); err == nil {
		oldRun = filepath.Join(m.cfg.RunDir, runTrashPrefix+s.id)
		if err := os.Rename(run, oldRun); err != nil {
			return nil, err
		}
	}
	if err := os.Rename(m.runDir(s.id), run); err != nil {
		return nil, err
	}
	handed = true
	if err := crash("rundir"); err != nil {
		return nil, err
	}
	if h, err = pooler.Adopt(ctx, s.handle, Spec{ID: sb.ID, RunDir: run}); err != nil {
		h = s.handle
		return nil, err
	}
	if err := crash("adopted"); err != nil {
		return nil, err
	}
	if err := pooler.Mount(ctx, h, mounts); err != nil {
		return nil, err
	}
	if _, err := m.openEgress(e, sb); err != nil {
		return nil, err
	}
	// The probe's client, with its connection: no new handshake.
	s.cur.Store(h)
	if e.client != nil {
		e.client.Close()
	}
	hc := *h
	e.dial = func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, &hc) }
	e.client, e.secret = s.client, hc.Secret
	s.client = nil
	if err := e.client.Assign(ctx, env); err != nil {
		return nil, fmt.Errorf("sandbox %s: assign pooled sandbox %s: %w", sb.ID, s.id, err)
	}
	s.hold.Close() // the guest no longer watches it
	if err := crash("assigned"); err != nil {
		return nil, err
	}
	raw, _ := json.Marshal(h)
	now := m.clock.Now()
	sb.Handle, sb.StartedAt, sb.WarmedAt = raw, &now, nil
	if sb, err = m.cfg.Store.UpdateSandbox(ctx, sb); err != nil {
		return nil, err
	}
	e.pooled, e.poolGen, e.poolKey, e.poolTrash, e.poolOldRun = true, next, s.key, dir, oldRun
	m.metrics.poolAssign.WithLabelValues(s.key.Driver, "assigned").Inc()
	return sb, nil
}

// poolStuck: an assignment failed and the sandbox's files could not be
// put back; they wait in the slot's directory for the next start.
type poolStuck struct{ err error }

func (c *poolStuck) Error() string { return c.err.Error() }
func (c *poolStuck) Unwrap() error { return c.err }

// poolCrash is a fault's simulated crash in the middle of an assignment.
type poolCrash struct{ err error }

func (c *poolCrash) Error() string {
	return "simulated crash during a pool assignment: " + c.err.Error()
}
func (c *poolCrash) Unwrap() error { return c.err }

// moveDirInto makes the empty directory into hold what dir holds, and
// then takes dir's name: every entry of dir is renamed into it (symlinks
// as they are: rename follows none), dir's mode is copied, dir is removed
// and into renamed to dir. Both are the daemon's directories, opened
// without following symlinks.
func moveDirInto(dir, into string) error {
	if err := moveEntries(dir, into); err != nil {
		return err
	}
	if fi, err := os.Lstat(dir); err == nil && fi.Mode().Perm() != 0o755 { // pool dirs are made 0755
		_ = os.Chmod(into, fi.Mode().Perm())
	}
	if err := unix.Rmdir(dir); err != nil && !errors.Is(err, unix.ENOENT) {
		return err
	}
	return os.Rename(into, dir)
}

// moveEntries renames every entry of from into to. An entry of the same
// name in to must be an empty directory (rename replaces it).
func moveEntries(from, to string) error {
	src, err := unix.Open(from, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if errors.Is(err, unix.ENOENT) {
		return nil
	}
	if err != nil {
		return &os.PathError{Op: "open", Path: from, Err: err}
	}
	f := os.NewFile(uintptr(src), from)
	defer f.Close()
	dst, err := unix.Open(to, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: to, Err: err}
	}
	defer unix.Close(dst)
	names, err := f.Readdirnames(-1)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := unix.Renameat(src, n, dst, n); err != nil {
			return &os.LinkError{Op: "rename", Old: filepath.Join(from, n), New: filepath.Join(to, n), Err: err}
		}
	}
	return nil
}

// unassignDirs puts a sandbox's workspace and runtime dir back where they
// belong after an assignment to slot dir was cut short: what was moved
// into the slot's directories goes back (or the slot's directory takes the
// sandbox's name if the sandbox's was already removed), and the stamp is
// rewritten for the directory now in place.
func (m *Manager) unassignDirs(dir, id string, gen int64) error {
	for _, sub := range []struct{ from, to string }{
		{filepath.Join(dir, "workspace"), m.workspaceDir(id)},
		{filepath.Join(dir, "runtime"), m.runtimeDir(id)},
	} {
		if _, err := os.Lstat(sub.from); errors.Is(err, fs.ErrNotExist) {
			continue // already the sandbox's
		}
		if _, err := os.Lstat(sub.to); errors.Is(err, fs.ErrNotExist) {
			if err := os.Rename(sub.from, sub.to); err != nil {
				return err
			}
			continue
		}
		if err := moveEntries(sub.from, sub.to); err != nil {
			return err
		}
		if err := os.Remove(sub.from); err != nil {
			return err
		}
	}
	if gen > 0 && m.readStamp(id) == 0 {
		return m.writeStamp(id, gen)
	}
	return nil
}

// sweepPoolOnce runs sweepPool once per manager.
func (m *Manager) sweepPoolOnce(ctx context.Context) error {
	m.pool.sweepOnce.Do(func() { m.pool.sweepErr = m.sweepPool(ctx) })
	return m.pool.sweepErr
}

// sweepPool cleans up after an earlier daemon process: its pooled
// sandboxes ended with it (their pipe closed) and are destroyed here
// (cgroups, directories), and an assignment it left half done is undone
// (the sandbox's files go back) or, when the store already records the
// instance as the sandbox's, kept. Only a sandbox's files that could not be
// put back are an error (a wake would find its workspace incomplete); what
// could not be cleaned up is logged and tried again at the next start.
func (m *Manager) sweepPool(ctx context.Context) error {
	if runs, err := os.ReadDir(m.cfg.RunDir); err == nil {
		for _, r := range runs {
			if strings.HasPrefix(r.Name(), runTrashPrefix) {
				_ = os.RemoveAll(filepath.Join(m.cfg.RunDir, r.Name()))
			}
		}
	}
	entries, err := os.ReadDir(m.poolDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	var errs []error
	for _, ent := range entries {
		slot := ent.Name()
		if !ent.IsDir() || strings.HasPrefix(slot, ".") {
			continue
		}
		dir := m.slotDir(slot)
		var h *Handle
		if raw, err := readSmallFile(dir, slotHandleFile); err == nil {
			h = &Handle{}
			if json.Unmarshal(raw, h) != nil {
				h = nil
			}
		}
		keep := false
		if raw, err := readJournal(dir); err == nil {
			id, genS, _ := strings.Cut(strings.TrimSpace(string(raw)), " ")
			gen, _ := strconv.ParseInt(genS, 10, 64)
			if id == "" || strings.ContainsAny(id, "/\x00") || strings.HasPrefix(id, ".") {
				errs = append(errs, fmt.Errorf("pool slot %s: bad assignment journal %q", slot, raw))
				continue
			}
			if err := m.unassignDirs(dir, id, gen); err != nil {
				errs = append(errs, fmt.Errorf("pool slot %s: put sandbox %s's files back: %w", slot, id, err))
				continue
			}
			if sb, err := m.cfg.Store.GetSandbox(ctx, id); err == nil && h != nil && len(sb.Handle) > 0 {
				var rec Handle
				if json.Unmarshal(sb.Handle, &rec) == nil && string(rec.Secret) == string(h.Secret) {
					keep = true // the assignment was recorded: the instance is the sandbox's
				}
			}
		}
		if h != nil && !keep {
			if d, ok := m.cfg.Drivers[h.Driver]; ok {
				if err := d.Destroy(ctx, h); err != nil {
					// Nothing of a sandbox's is in it: clean up next time.
					m.log.WarnContext(ctx, "sandbox pool: could not destroy a pooled sandbox left by an earlier run", "slot", slot, "err", err)
					continue
				}
			}
		}
		if !keep {
			// A start the earlier daemon did not finish has no handle, and
			// its bwrap may still wait to be let go: end it by what it
			// binds.
			for _, d := range m.cfg.Drivers {
				if p, ok := d.(Pooler); ok {
					if err := p.KillStarting(ctx, filepath.Join(dir, "workspace")); err != nil {
						m.log.WarnContext(ctx, "sandbox pool: look for a pooled sandbox left starting", "slot", slot, "err", err)
					}
				}
			}
			_ = os.RemoveAll(m.runDir(slot))
		}
		if err := os.RemoveAll(dir); err != nil {
			m.log.WarnContext(ctx, "sandbox pool: could not remove a pooled sandbox's directory", "slot", slot, "err", err)
		}
		m.log.InfoContext(ctx, "sandbox pool: cleaned up after an earlier run", "slot", slot, "kept_as_assigned", keep)
	}
	return errors.Join(errs...)
}

// readJournal reads a slot's assignment journal (a symlink's target).
func readJournal(dir string) ([]byte, error) {
	t, err := os.Readlink(filepath.Join(dir, slotAssignFile))
	return []byte(t), err
}

// readSmallFile reads a file of the daemon's own (its private data dir).
func readSmallFile(dir, name string) ([]byte, error) { return os.ReadFile(filepath.Join(dir, name)) }
