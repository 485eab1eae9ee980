package guest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"regexp"
	"sync"
	"time"
)

// Durable op records (seed 003). An exec that carries an op id is recorded
// in the runtime dir (Config.RuntimeDir, /.agentkernel/runtime), which the
// daemon snapshots with the workspace at hibernation and restores with the
// sandbox, so the record outlives this guest:
//
//	ops/<op_id>/             created and made durable before the command starts
//	ops/<op_id>/accepted     what was accepted (informational, made durable with the result)
//	ops/<op_id>/result.json  written atomically and durably when it ends
//
// The op's directory is the acceptance: its entry in ops/ is fsynced
// before the command starts, and that one fsync is all an acceptance
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

const (
	// runtimeDirName is where earlier versions kept the runtime's records,
	// in the work dir (and where a guest without a RuntimeDir still does);
	// the files API leaves it out of the work dir's listing.
	runtimeDirName = ".agentkernel"
	opsDir         = "ops"
	// maxOpOutput bounds each stream kept in result.json (its head).
	maxOpOutput = 1 << 20
)

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
}

func newOpTable(runtimeDir string, now func() time.Time, log *slog.Logger) *opTable {
	t := &opTable{dir: runtimeDir, now: now, log: log, running: map[string]chan struct{}{}}
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
	t.mu.Unlock()
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
	return st, t.running[id], err
}

func (t *opTable) statusLocked(id string) (OpStatus, error) {
	st := OpStatus{OpID: id, State: OpStateUnknown}
	if _, ok := t.running[id]; ok {
		st.State = OpStateRunning
		return st, nil
	}
	err := withRuntimeRoot(t.dir, func(root *os.Root) error {
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
		if err := f.Sync(); err != nil {
			return err
		}
		return syncDir(root, dir)
	})
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
