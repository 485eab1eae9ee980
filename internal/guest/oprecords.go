package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Durable op records (seed 003). An exec that carries an op id is recorded
// in the runtime dir (Config.RuntimeDir, /.agentkernel/runtime), which the
// daemon snapshots with the workspace at hibernation and restores with the
// sandbox, so the record outlives this guest:
//
//	ops/<op_id>/             created (durably, see below) before the command starts
//	ops/<op_id>/accepted     what was accepted (informational)
//	ops/<op_id>/result.json  written atomically (and durably) when it ends
//	ops/boot                 the boot whose records need no fsync (see below)
//
// The op's directory is the acceptance. Where the boot id cannot be read,
// its entry in ops/ is fsynced before the command starts, and that one fsync is all an acceptance
// costs — shared by the acceptances made while it waits (group commit,
// see accept). A result costs two (the file, then its directory) that share one
// journal commit (see writeRecord). Fsyncs are
// most of a journalled call's overhead, so none is spent on what recovery
// does not need: the accepted file's content is only informational.
//
// Recovery asks GET /ops/{op_id}: a result is read back, no record means
// the command never ran, a running op is reattached to, and an accepted op
// with no result that this guest is not running died with an earlier guest
// (accepted_gone): it may have run, so it must never be re-run blindly.
//
// Records within one boot of the kernel. A record written without an
// fsync is lost only if the kernel's page cache is: a daemon, a guest or a
// whole sandbox killed -9 leaves it readable to the next guest, and only
// the machine's end (power loss, kernel crash) can take it. So the fsyncs
// are spent once per boot instead of twice per call: ops/boot names the
// kernel boot (/proc/sys/kernel/random/boot_id) whose records may not be
// on disk, written durably before the first record of that boot. A guest
// that finds another boot's name there knows an earlier boot may have
// lost records, and from then on (ops/boot says "unsure", for every later
// guest too) it answers GET /ops for an op it has no record of as
// accepted_gone — it may have run before the machine went down — instead
// of unknown; an exec of a new op id is still accepted. A result that was
// lost reads as accepted_gone as it always did. Without a readable boot
// id the guest makes every record durable before it answers, as before.

const (
	// runtimeDirName is where earlier versions kept the runtime's records,
	// in the work dir (and where a guest without a RuntimeDir still does);
	// the files API leaves it out of the work dir's listing.
	runtimeDirName = ".agentkernel"
	opsDir         = "ops"
	// maxOpOutput bounds each stream kept in result.json (its head).
	maxOpOutput = 1 << 20
	// bootFile, in ops/, names the boot whose records need no fsync.
	bootFile = "boot"
	// bootUnsure marks, after the boot id in bootFile, an ops/ an earlier
	// boot may have lost records of.
	bootUnsure = "unsure"
)

// bootIDPath is the kernel's id of the current boot (a random UUID).
var bootIDPath = "/proc/sys/kernel/random/boot_id"

// readBootID is the current boot's id, "" when it cannot be read.
func readBootID() string {
	b, err := os.ReadFile(bootIDPath)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

var opIDPattern = regexp.MustCompile(`^op_[0-9a-f]{16,64}$`)

func validOpID(id string) error {
	if !opIDPattern.MatchString(id) {
		return fmt.Errorf("%w: op_id %q must match %s", errBadRequest, id, opIDPattern)
	}
	return nil
}

// opConflict: the op id was accepted before; it carries the op's state
// for the 409 answer.
type opConflict struct{ status OpStatus }

func (e *opConflict) Error() string {
	return fmt.Sprintf("op %s was already accepted (state %s): an op id runs at most once", e.status.OpID, e.status.State)
}

func (e *opConflict) Unwrap() error { return ErrOpExists }

// opAccepted is the content of an accepted record.
type opAccepted struct {
	OpID       string    `json:"op_id"`
	AcceptedAt time.Time `json:"accepted_at"`
	Argv       []string  `json:"argv"`
	Cwd        string    `json:"cwd"`
}

// opTable tracks the ops this guest runs. One lock covers the check of
// the records and the write of a new one, so two requests with one op id
// cannot both be accepted.
type opTable struct {
	dir string // the runtime dir; records are under dir/ops
	now func() time.Time
	log *slog.Logger

	mu      sync.Mutex
	running map[string]chan struct{} // closed when the op's result is written

	// acceptSync is the group commit of acceptances: the fsync of ops/
	// that makes new op directories durable serves every acceptance
	// waiting for one.
	acceptSync groupSync
	// syncOps makes ops/'s entries durable (tests replace it).
	syncOps func() error

	// bootID reads the current boot's id (tests replace it).
	bootID func() string
	// booted: ops/boot was read (and written) for this guest; then lazy
	// says records need no fsync (this boot is named in ops/boot) and
	// unsure that an earlier boot may have lost records.
	booted, lazy, unsure bool
	// spares are the spare op directories ready (see acceptSpare);
	// refilling says a goroutine is making the missing ones.
	spares    []string
	refilling bool
	bg        sync.WaitGroup // the refill goroutine
}

// wait waits for the background work on the records (a guest that shuts
// down leaves nothing half made that it could finish).
func (t *opTable) wait() { t.bg.Wait() }

func newOpTable(runtimeDir string, now func() time.Time, log *slog.Logger) *opTable {
	t := &opTable{dir: runtimeDir, now: now, log: log, running: map[string]chan struct{}{}, bootID: readBootID}
	t.syncOps = func() error {
		return withRuntimeRoot(t.dir, func(root *os.Root) error { return syncDir(root, opsDir) })
	}
	return t
}

// accept durably records the op as accepted and marks it running, or
// returns *opConflict when it was accepted before (by this guest or an
// earlier one).
//
// The op's directory is created and the op marked running under the
// table's lock (a second request for the id conflicts from then on); the
// fsync that makes the directory durable runs after the lock is released,
// shared with every acceptance made meanwhile (acceptSync), and accept
// returns only once it has ended: nothing runs before its acceptance is
// durable.
func (t *opTable) accept(id string, c *command) error {
	rec, err := json.Marshal(opAccepted{OpID: id, AcceptedAt: t.now().UTC(), Argv: c.argv, Cwd: c.dir})
	if err != nil {
		return err
	}
	t.mu.Lock()
	st, err := t.statusLocked(id)
	if err == nil && st.State != OpStateUnknown {
		err = &opConflict{status: st}
	}
	if err == nil {
		if err = t.writeAccepted(id, rec); err != nil {
			err = fmt.Errorf("record op %s as accepted: %w", id, err)
		}
	}
	if err != nil {
		t.mu.Unlock()
		return err
	}
	t.running[id] = make(chan struct{})
	lazy := t.lazy
	t.mu.Unlock()
	if lazy {
		return nil
	}
	if err := t.acceptSync.sync(t.syncOps); err != nil {
		// Not durable: never accepted, so never run.
		t.abandon(id)
		return fmt.Errorf("record op %s as accepted: %w", id, err)
	}
	return nil
}

// finish writes the op's result and ends its running state. If the write
// fails the op reads as accepted_gone: ambiguous, which is safe.
func (t *opTable) finish(id string, res OpResult) {
	b, err := json.Marshal(res)
	if err == nil {
		err = t.writeRecord(id, "result.json", b)
	}
	if err != nil {
		t.log.Error("guest: op result not recorded", "op_id", id, "err", err)
	}
	t.done(id)
}

// abandon forgets an op whose command never started (the guest failed to
// set it up), so a retry may run it.
func (t *opTable) abandon(id string) {
	if err := withRuntimeRoot(t.dir, func(root *os.Root) error {
		if err := root.RemoveAll(path.Join(opsDir, id)); err != nil {
			return err
		}
		return syncDir(root, opsDir)
	}); err != nil {
		t.log.Error("guest: abandoned op record not removed", "op_id", id, "err", err)
	}
	t.done(id)
}

func (t *opTable) done(id string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if ch, ok := t.running[id]; ok {
		close(ch)
		delete(t.running, id)
	}
}

// status reports the op's state and, once finished, its result; wait is
// closed when a running op ends (nil otherwise).
func (t *opTable) status(id string) (st OpStatus, wait <-chan struct{}, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st, err = t.statusLocked(id)
	if err == nil && st.State == OpStateUnknown && t.unsure {
		// An earlier boot may have accepted it and lost the record.
		st.State = OpStateAcceptedGone
	}
	return st, t.running[id], err
}

// statusLocked is what this guest's records say of the op (for accept:
// no record is unknown, whatever an earlier boot lost).
func (t *opTable) statusLocked(id string) (OpStatus, error) {
	st := OpStatus{OpID: id, State: OpStateUnknown}
	if _, ok := t.running[id]; ok {
		st.State = OpStateRunning
		return st, nil
	}
	err := withRuntimeRoot(t.dir, func(root *os.Root) error {
		if err := t.bootLocked(root); err != nil {
			return err
		}
		dir := path.Join(opsDir, id)
		b, err := root.ReadFile(path.Join(dir, "result.json"))
		switch {
		case err == nil:
			var res OpResult
			uerr := json.Unmarshal(b, &res)
			if uerr == nil {
				st.State, st.Result = OpStateFinished, &res
				return nil
			}
			// Torn by a crash before its fsync (see writeRecord): the
			// result was never reported, so the op is accepted_gone.
			t.log.Warn("guest: op result.json unreadable", "op_id", id, "err", uerr)
		case !errors.Is(err, fs.ErrNotExist):
			return err
		}
		// The directory itself is the acceptance (the accepted file in it
		// may not have reached the disk before a crash).
		if _, err := root.Stat(dir); err == nil {
			st.State = OpStateAcceptedGone
		} else if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	})
	return st, err
}

// writeAccepted creates the op's directory; accept's fsync of ops/ makes
// its entry durable, and from then on the op reads as accepted in any
// later guest. The accepted file is written in it without an fsync of its
// own; finish's fsync of the directory makes it durable.
func (t *opTable) writeAccepted(id string, data []byte) error {
	return withRuntimeRoot(t.dir, func(root *os.Root) error {
		if t.lazy {
			if ok, err := t.acceptSpare(root, id, data); ok || err != nil {
				return err
			}
		}
		if err := mkdirDurable(root, opsDir); err != nil {
			return err
		}
		dir := path.Join(opsDir, id)
		if err := root.Mkdir(dir, 0o700); err != nil {
			return err // ErrExist too: a directory we did not create is not ours to remove
		}
		f, err := root.OpenFile(path.Join(dir, "accepted"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil {
			_, err = f.Write(data)
			if cerr := f.Close(); err == nil {
				err = cerr
			}
		}
		if err != nil {
			_ = root.RemoveAll(dir)
			return err
		}
		return nil
	})
}

// writeRecord writes dir/name durably: temp file, rename, fsync of the
// file and of the directory, so a record that was reported written
// survives a crash. The directory was made durable by writeAccepted.
func (t *opTable) writeRecord(id, name string, data []byte) error {
	return withRuntimeRoot(t.dir, func(root *os.Root) error {
		dir := path.Join(opsDir, id)
		tmp := path.Join(dir, "."+name+".tmp")
		f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if errors.Is(err, fs.ErrNotExist) {
			// Something in the workspace removed the op's directory while
			// it ran: put it back (durably) rather than lose the result.
			if err = mkdirDurable(root, dir); err == nil {
				f, err = root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
			}
		}
		if err != nil {
			return err
		}
		defer f.Close()
		// Renamed before the fsyncs, so the file's data, its new name and
		// the rename all go to disk in one journal commit (the directory's
		// fsync then finds nothing left to commit): one commit, not two.
		// A guest that dies leaves the whole file or none; only a crash of
		// the machine before the fsyncs can leave a torn result.json, which
		// statusLocked reads as accepted_gone, and that result was never
		// reported.
		_, err = f.Write(data)
		if err == nil {
			err = root.Rename(tmp, path.Join(dir, name))
		}
		if err != nil {
			_ = root.Remove(tmp)
			return err
		}
		if t.lazyRecords() {
			return nil
		}
		if err := f.Sync(); err != nil {
			return err
		}
		return syncDir(root, dir)
	})
}

// Spare op directories. Creating a file or directory on a journalling
// file system waits for the journal (on this project's machines about
// half a millisecond each, more while others fsync), and a record costs
// three: the op's directory, its accepted file, its result's temp file.
// Renaming and writing into existing files costs far less. So a guest
// whose records need no fsync keeps a few op directories made ahead of
// need, each with its (empty) accepted file and result temp file:
// ops/.spare-0 … ops/.spare-<numSpares-1> (never an op id). Acceptance
// renames one to the op's id (RENAME_NOREPLACE: an op directory already
// there is never replaced) and fills its accepted file; the result goes
// into the temp file, renamed into place as always. A background
// goroutine makes the used spare again. Fixed names, so a guest that dies
// leaves at most numSpares of them, which the next one takes up.
const (
	sparePrefix = ".spare-"
	numSpares   = 4
)

// acceptSpare makes op id's directory from a spare (the caller holds
// t.mu). ok is false when no spare was ready: the caller makes it.
func (t *opTable) acceptSpare(root *os.Root, id string, data []byte) (ok bool, err error) {
	if len(t.spares) == 0 {
		t.refillSpares()
		return false, nil
	}
	name := t.spares[len(t.spares)-1]
	t.spares = t.spares[:len(t.spares)-1]
	defer t.refillSpares()
	ops, err := root.Open(opsDir)
	if err != nil {
		return false, nil
	}
	defer ops.Close()
	fd := int(ops.Fd())
	if err := unix.Renameat2(fd, name, fd, id, unix.RENAME_NOREPLACE); err != nil {
		if errors.Is(err, unix.EEXIST) {
			return false, fs.ErrExist // ours or not, not to be replaced
		}
		return false, nil // RENAME_NOREPLACE unsupported, or the spare went: make the directory
	}
	f, err := root.OpenFile(path.Join(opsDir, id, "accepted"), os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		_, err = f.Write(data)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	// The directory is the acceptance; a spare without its accepted file
	// (the sandbox took it) loses only the informational record.
	if err != nil {
		t.log.Debug("guest: accepted record of a spare not written", "op_id", id, "err", err)
	}
	return true, nil
}

// refillSpares starts making the missing spares in the background (the
// caller holds t.mu).
func (t *opTable) refillSpares() {
	if t.refilling {
		return
	}
	t.refilling = true
	t.bg.Add(1)
	go func() {
		defer t.bg.Done()
		for {
			t.mu.Lock()
			name, need := t.missingSpareLocked()
			if !need {
				t.refilling = false
				t.mu.Unlock()
				return
			}
			t.mu.Unlock()
			err := withRuntimeRoot(t.dir, func(root *os.Root) error { return makeSpare(root, name) })
			t.mu.Lock()
			if err == nil {
				t.spares = append(t.spares, name)
			}
			t.mu.Unlock()
			if err != nil {
				t.log.Debug("guest: spare op directory not made", "spare", name, "err", err)
				t.mu.Lock()
				t.refilling = false
				t.mu.Unlock()
				return
			}
		}
	}()
}

// missingSpareLocked names a spare that is not ready.
func (t *opTable) missingSpareLocked() (string, bool) {
	ready := map[string]bool{}
	for _, n := range t.spares {
		ready[n] = true
	}
	for i := range numSpares {
		if n := sparePrefix + strconv.Itoa(i); !ready[n] {
			return n, true
		}
	}
	return "", false
}

// makeSpare makes ops/<name> with an empty accepted file and result temp
// file, taking up what an earlier guest left of it.
func makeSpare(root *os.Root, name string) error {
	if err := mkdirDurable(root, opsDir); err != nil {
		return err
	}
	dir := path.Join(opsDir, name)
	if err := root.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	for _, f := range []string{"accepted", ".result.json.tmp"} {
		h, err := root.OpenFile(path.Join(dir, f), os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
		if err != nil {
			return err
		}
		if err := h.Close(); err != nil {
			return err
		}
	}
	return nil
}

// lazyRecords says records need no fsync (see bootLocked).
func (t *opTable) lazyRecords() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.lazy
}

// bootLocked reads ops/boot once per guest (the caller holds t.mu): this
// boot named there means records need no fsync; another boot named there
// means that boot's unsynced records may be lost, which ops/boot then says
// for good ("unsure"). ops/boot names this boot, durably, before any
// record is written without an fsync. No ops/boot: every record there was
// made durable (by a guest that fsynced each), so none was lost.
func (t *opTable) bootLocked(root *os.Root) error {
	if t.booted {
		return nil
	}
	cur := t.bootID()
	name := path.Join(opsDir, bootFile)
	prev, unsure, err := readBootFile(root, name)
	if err != nil {
		return err
	}
	if prev != "" && prev != cur {
		unsure = true
	}
	if cur != "" && prev != cur {
		// Name this boot (ops/boot naming it already says unsure if it
		// must: it was written so).
		line := cur
		if unsure {
			line += " " + bootUnsure
		}
		if err := writeDurable(root, name, []byte(line+"\n")); err != nil {
			return fmt.Errorf("record the boot of op records: %w", err)
		}
	}
	t.booted, t.lazy, t.unsure = true, cur != "", unsure
	if t.lazy {
		t.refillSpares()
	}
	return nil
}

// readBootFile reads ops/boot: the boot id it names ("" when there is
// none) and whether it says unsure. The sandbox can write the file: it
// decides only how its own records are kept, and is read bounded.
func readBootFile(root *os.Root, name string) (boot string, unsure bool, err error) {
	f, err := root.Open(name)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 256))
	if err != nil {
		return "", false, err
	}
	fields := strings.Fields(string(b))
	if len(fields) == 0 {
		// Torn: written without its fsync finishing. Another boot.
		return "-", true, nil
	}
	return fields[0], len(fields) > 1 && fields[1] == bootUnsure, nil
}

// writeDurable replaces name with data: temp file, fsync, rename, fsync
// of the directory (made durably if missing).
func writeDurable(root *os.Root, name string, data []byte) error {
	dir := path.Dir(name)
	if err := mkdirDurable(root, dir); err != nil {
		return err
	}
	tmp := path.Join(dir, "."+path.Base(name)+".tmp")
	f, err := root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = root.Rename(tmp, name)
	}
	if err != nil {
		_ = root.Remove(tmp)
		return err
	}
	return syncDir(root, dir)
}

// withRuntimeRoot runs fn on an os.Root of the runtime dir (made if
// missing): a symlink the agent planted (say ops → /etc) is never followed
// out of it.
func withRuntimeRoot(dir string, fn func(root *os.Root) error) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("runtime dir: %w", err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("open runtime dir: %w", err)
	}
	defer root.Close()
	return fn(root)
}

// mkdirDurable creates dir and its missing parents, fsyncing the parent of
// each one it creates so the new entries survive a crash.
func mkdirDurable(root *os.Root, dir string) error {
	if dir == "." {
		return nil
	}
	parent := path.Dir(dir)
	if err := mkdirDurable(root, parent); err != nil {
		return err
	}
	err := root.Mkdir(dir, 0o700)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return err
	}
	return syncDir(root, parent)
}

func syncDir(root *os.Root, dir string) error {
	d, err := root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// opOutput keeps the head of one output stream for result.json.
type opOutput struct {
	data      []byte
	truncated bool
}

func (o *opOutput) write(p []byte) {
	if room := maxOpOutput - len(o.data); len(p) > room {
		p, o.truncated = p[:room], true
	}
	o.data = append(o.data, p...)
}

// opRun collects one journalled exec's output for its result. A nil
// *opRun (an exec without an op id) does nothing.
type opRun struct {
	id             string
	ops            *opTable
	now            func() time.Time
	stdout, stderr opOutput
}

func (o *opRun) capture(f ExecFrame) {
	if o == nil {
		return
	}
	switch f.Stream {
	case "stdout":
		o.stdout.write(f.Data)
	case "stderr":
		o.stderr.write(f.Data)
	}
}

// finish records the result from the exec's last frame.
func (o *opRun) finish(end ExecFrame) {
	if o == nil {
		return
	}
	o.ops.finish(o.id, OpResult{
		ExitCode: *end.ExitCode, TimedOut: end.TimedOut, DurationMS: end.DurationMS,
		Stdout: o.stdout.data, Stderr: o.stderr.data,
		StdoutTruncated: o.stdout.truncated, StderrTruncated: o.stderr.truncated,
		FinishedAt: o.now().UTC(),
	})
}

func (o *opRun) abandon() {
	if o != nil {
		o.ops.abandon(o.id)
	}
}
