package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func testOpID(n int) string { return fmt.Sprintf("op_%016x", n) }

// opRecordPath is where the guest keeps an op's record on the host.
func opRecordPath(work, id, name string) string {
	return filepath.Join(work, ".agentkernel", "ops", id, name)
}

// mustOp asks the guest for an op's state.
func mustOp(t *testing.T, c *Client, id string) *OpStatus {
	t.Helper()
	st, err := c.Op(context.Background(), id)
	if err != nil {
		t.Fatalf("Op(%s): %v", id, err)
	}
	if st.OpID != id {
		t.Fatalf("Op(%s) answered for %q", id, st.OpID)
	}
	return st
}

// mustOpExists checks err is the 409 of an op seen before, in state want.
func mustOpExists(t *testing.T, err error, want string) *OpStatus {
	t.Helper()
	var ge *Error
	if !errors.Is(err, ErrOpExists) || !errors.As(err, &ge) || ge.Status != 409 || ge.Op == nil {
		t.Fatalf("err = %v, want HTTP 409 op_exists with the op's state", err)
	}
	if ge.Op.State != want {
		t.Fatalf("409 says state %q, want %q", ge.Op.State, want)
	}
	return ge.Op
}

// TestOpAcceptedBeforeStart: the command itself sees its accepted record,
// and finds the result afterwards.
func TestOpAcceptedBeforeStart(t *testing.T) {
	c, work := startGuest(t, nil)
	id := testOpID(1)
	if st := mustOp(t, c, id); st.State != OpStateUnknown || st.Result != nil {
		t.Fatalf("before the exec: %+v, want unknown", st)
	}
	out, _, res, err := c.ExecOutput(context.Background(), ExecRequest{OpID: id,
		Shell: `test -f .agentkernel/ops/` + id + `/accepted && echo accepted-before-start; ` +
			`test -e .agentkernel/ops/` + id + `/result.json || echo no-result-yet`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("exec: %v, %+v", err, res)
	}
	if want := "accepted-before-start\nno-result-yet\n"; string(out) != want {
		t.Fatalf("stdout = %q, want %q", out, want)
	}
	st := mustOp(t, c, id)
	if st.State != OpStateFinished || st.Result == nil || string(st.Result.Stdout) != string(out) ||
		st.Result.ExitCode != 0 || st.Result.TimedOut || st.Result.StdoutTruncated {
		t.Fatalf("after the exec: %+v (result %+v)", st, st.Result)
	}
	// The records on disk are what the guest answers from.
	var acc opAccepted
	b, err := os.ReadFile(opRecordPath(work, id, "accepted"))
	if err != nil || json.Unmarshal(b, &acc) != nil || acc.OpID != id || acc.Argv[0] != "/bin/sh" {
		t.Fatalf("accepted record %s: %v", b, err)
	}
	var onDisk OpResult
	b, err = os.ReadFile(opRecordPath(work, id, "result.json"))
	if err != nil || json.Unmarshal(b, &onDisk) != nil || string(onDisk.Stdout) != string(out) {
		t.Fatalf("result.json %s: %v", b, err)
	}
	if left, _ := filepath.Glob(opRecordPath(work, id, ".*.tmp")); len(left) > 0 {
		t.Fatalf("temp files left behind: %v", left)
	}
}

// TestOpRunningThenFinished: while the command runs the op is running and
// a second exec is refused; after it ends, it is finished and still
// refused.
func TestOpRunningThenFinished(t *testing.T) {
	c, work := startGuest(t, nil)
	id := testOpID(2)
	started := make(chan struct{})
	type outcome struct {
		res *ExecResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		var once sync.Once
		res, err := c.Exec(context.Background(), ExecRequest{OpID: id,
			Shell: `echo started; while [ ! -e gate ]; do sleep 0.01; done; echo run >> log`},
			func(string, []byte) { once.Do(func() { close(started) }) })
		done <- outcome{res, err}
	}()
	<-started
	if st := mustOp(t, c, id); st.State != OpStateRunning || st.Result != nil {
		t.Fatalf("while running: %+v", st)
	}
	_, err := c.Exec(context.Background(), ExecRequest{OpID: id, Shell: `echo run >> log`}, nil)
	mustOpExists(t, err, OpStateRunning)
	// A short wait on a running op answers "running" when it runs on.
	if st, err := c.WaitOp(context.Background(), id, 20*time.Millisecond); err != nil || st.State != OpStateRunning {
		t.Fatalf("WaitOp on a running op: %+v, %v", st, err)
	}

	if err := os.WriteFile(filepath.Join(work, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	o := <-done
	if o.err != nil || o.res.ExitCode != 0 {
		t.Fatalf("exec: %v, %+v", o.err, o.res)
	}
	st := mustOp(t, c, id)
	if st.State != OpStateFinished || string(st.Result.Stdout) != "started\n" {
		t.Fatalf("after the exec: %+v", st)
	}
	_, err = c.Exec(context.Background(), ExecRequest{OpID: id, Shell: `echo run >> log`}, nil)
	if op := mustOpExists(t, err, OpStateFinished); op.Result == nil || string(op.Result.Stdout) != "started\n" {
		t.Fatalf("409 of a finished op carries result %+v", op.Result)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "log")); string(b) != "run\n" {
		t.Fatalf("log = %q: the op ran %d times, want once", b, strings.Count(string(b), "run"))
	}
}

// TestOpRacingDuplicatesRunOnce: of concurrent execs with one op id,
// exactly one runs.
func TestOpRacingDuplicatesRunOnce(t *testing.T) {
	c, work := startGuest(t, nil)
	id := testOpID(3)
	const n = 10
	errs := make([]error, n)
	var wg sync.WaitGroup
	gate := make(chan struct{})
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-gate
			_, errs[i] = c.Exec(context.Background(), ExecRequest{OpID: id, Shell: `echo x >> log`}, nil)
		}()
	}
	close(gate)
	wg.Wait()
	ran := 0
	for i, err := range errs {
		switch {
		case err == nil:
			ran++
		case !errors.Is(err, ErrOpExists):
			t.Fatalf("exec %d: %v", i, err)
		}
	}
	b, _ := os.ReadFile(filepath.Join(work, "log"))
	if ran != 1 || string(b) != "x\n" {
		t.Fatalf("%d execs ran, log %q; want exactly one", ran, b)
	}
}

// TestOpRunsOnWhenClientGoes: a journalled exec is not killed with its
// request; its result is recorded and can be waited for.
func TestOpRunsOnWhenClientGoes(t *testing.T) {
	c, work := startGuest(t, nil)
	id := testOpID(4)
	ctx, cancel := context.WithCancel(context.Background())
	_, err := c.Exec(ctx, ExecRequest{OpID: id,
		Shell: `echo started; while [ ! -e gate ]; do sleep 0.01; done; echo after-gate; echo done > out`},
		func(string, []byte) { cancel() })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if st := mustOp(t, c, id); st.State != OpStateRunning {
		t.Fatalf("after the client left: %+v, want running", st)
	}
	if err := os.WriteFile(filepath.Join(work, "gate"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	st, err := c.WaitOp(context.Background(), id, time.Minute)
	if err != nil || st.State != OpStateFinished {
		t.Fatalf("WaitOp: %+v, %v", st, err)
	}
	if st.Result.ExitCode != 0 || string(st.Result.Stdout) != "started\nafter-gate\n" {
		t.Fatalf("result %+v (stdout %q)", st.Result, st.Result.Stdout)
	}
	if b, err := os.ReadFile(filepath.Join(work, "out")); err != nil || string(b) != "done\n" {
		t.Fatalf("out = %q, %v: the command did not run to its end", b, err)
	}
}

// TestOpAcceptedGoneInANewGuest: records outlive the guest. A new guest on
// the same workspace reads finished results back, and calls an accepted
// op without a result (the guest died before writing it) accepted_gone,
// refusing to run it again.
func TestOpAcceptedGoneInANewGuest(t *testing.T) {
	first, work := startGuest(t, nil)
	ctx := context.Background()
	for i, cmd := range []string{`echo one >> log; echo one`, `echo two >> log`} {
		if _, err := first.Exec(ctx, ExecRequest{OpID: testOpID(10 + i), Shell: cmd}, nil); err != nil {
			t.Fatal(err)
		}
	}
	// The second op's guest "died" before it could write the result.
	if err := os.Remove(opRecordPath(work, testOpID(11), "result.json")); err != nil {
		t.Fatal(err)
	}

	second, _ := startGuest(t, func(cfg *Config) { cfg.WorkDir = work })
	if st := mustOp(t, second, testOpID(10)); st.State != OpStateFinished || string(st.Result.Stdout) != "one\n" {
		t.Fatalf("finished op in the new guest: %+v", st)
	}
	if st := mustOp(t, second, testOpID(11)); st.State != OpStateAcceptedGone || st.Result != nil {
		t.Fatalf("op without result in the new guest: %+v, want accepted_gone", st)
	}
	_, err := second.Exec(ctx, ExecRequest{OpID: testOpID(11), Shell: `echo two >> log`}, nil)
	mustOpExists(t, err, OpStateAcceptedGone)
	if st := mustOp(t, second, testOpID(12)); st.State != OpStateUnknown {
		t.Fatalf("never-seen op: %+v, want unknown", st)
	}
	if _, err := second.Exec(ctx, ExecRequest{OpID: testOpID(12), Shell: `echo three >> log`}, nil); err != nil {
		t.Fatalf("a new op in the new guest: %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "log")); string(b) != "one\ntwo\nthree\n" {
		t.Fatalf("log = %q: every op must run exactly once", b)
	}
}

// TestOpResultTruncated: result.json keeps the first MiB of each stream;
// the client still streams everything.
func TestOpResultTruncated(t *testing.T) {
	c, _ := startGuest(t, nil)
	id := testOpID(5)
	const size = maxOpOutput + 1000
	out, errb, res, err := c.ExecOutput(context.Background(), ExecRequest{OpID: id,
		Shell: fmt.Sprintf(`head -c %d /dev/zero | tr '\0' a; echo small >&2`, size)})
	if err != nil || res.ExitCode != 0 || len(out) != size || string(errb) != "small\n" {
		t.Fatalf("exec: %v, %+v, %d bytes of stdout, stderr %q", err, res, len(out), errb)
	}
	st := mustOp(t, c, id)
	r := st.Result
	if r == nil || len(r.Stdout) != maxOpOutput || !r.StdoutTruncated || !bytes.Equal(r.Stdout, out[:maxOpOutput]) {
		t.Fatalf("stdout kept: %d bytes, truncated %v", len(r.Stdout), r.StdoutTruncated)
	}
	if string(r.Stderr) != "small\n" || r.StderrTruncated {
		t.Fatalf("stderr kept: %q, truncated %v", r.Stderr, r.StderrTruncated)
	}
}

// TestOpResultOfFailures: timeouts and missing binaries are results too.
func TestOpResultOfFailures(t *testing.T) {
	c, _ := startGuest(t, nil)
	ctx := context.Background()
	if _, err := c.Exec(ctx, ExecRequest{OpID: testOpID(6), Shell: `sleep 100`, TimeoutMS: 100}, nil); err != nil {
		t.Fatal(err)
	}
	if r := mustOp(t, c, testOpID(6)).Result; r == nil || !r.TimedOut || r.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("timed-out op result %+v", r)
	}
	if _, err := c.Exec(ctx, ExecRequest{OpID: testOpID(7), Argv: []string{"no-such-binary-xyz"}}, nil); err != nil {
		t.Fatal(err)
	}
	if r := mustOp(t, c, testOpID(7)).Result; r == nil || r.ExitCode != 127 || !strings.Contains(string(r.Stderr), "not found") {
		t.Fatalf("missing-binary op result %+v", r)
	}
	// A request refused before anything started leaves no record.
	if _, err := c.Exec(ctx, ExecRequest{OpID: testOpID(8), Argv: []string{"true"}, Cwd: "/no/such/dir"}, nil); err == nil {
		t.Fatal("exec in a missing cwd: want an error")
	}
	if st := mustOp(t, c, testOpID(8)); st.State != OpStateUnknown {
		t.Fatalf("refused op: %+v, want unknown", st)
	}
}

func TestOpBadIDs(t *testing.T) {
	c, _ := startGuest(t, nil)
	ctx := context.Background()
	for _, id := range []string{
		"op_123",                        // too short
		"op_" + strings.Repeat("a", 65), // too long
		"op_ABCDEF0123456789",           // upper case
		"xx_0123456789abcdef",           // wrong prefix
		"op_0123456789abcdeg",           // not hex
		"op_0123456789abcdef/../../etc", // a path
		"op_0123456789abcdef\n",         // trailing newline
	} {
		_, err := c.Exec(ctx, ExecRequest{OpID: id, Argv: []string{"true"}}, nil)
		var ge *Error
		if !errors.As(err, &ge) || ge.Status != 400 {
			t.Errorf("Exec with op_id %q: err = %v, want HTTP 400", id, err)
		}
		_, err = c.Op(ctx, id)
		if !errors.As(err, &ge) || ge.Status != 400 {
			t.Errorf("Op(%q): err = %v, want HTTP 400", id, err)
		}
	}
	_, err := c.StartProcess(ctx, ExecRequest{OpID: testOpID(9), Argv: []string{"true"}})
	var ge *Error
	if !errors.As(err, &ge) || ge.Status != 400 {
		t.Errorf("StartProcess with an op_id: err = %v, want HTTP 400", err)
	}
}

// TestListDirHidesRuntimeDir: the op records are not the agent's files.
func TestListDirHidesRuntimeDir(t *testing.T) {
	c, work := startGuest(t, nil)
	ctx := context.Background()
	id := testOpID(20)
	if _, err := c.Exec(ctx, ExecRequest{OpID: id, Shell: `echo hi > mine.txt`}, nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(work, ".agentkernel")); err != nil {
		t.Fatalf("no runtime dir after an op: %v", err)
	}
	for _, p := range []string{".", work, work + "/"} {
		list, err := c.ListDir(ctx, p)
		if err != nil {
			t.Fatalf("ListDir(%q): %v", p, err)
		}
		var names []string
		for _, fi := range list {
			names = append(names, fi.Name)
		}
		if len(names) != 1 || names[0] != "mine.txt" {
			t.Fatalf("ListDir(%q) = %v, want [mine.txt]", p, names)
		}
	}
	// By path it stays reachable, for the runtime's own tools.
	list, err := c.ListDir(ctx, ".agentkernel/ops")
	var names []string
	for _, fi := range list {
		if !strings.HasPrefix(fi.Name, sparePrefix) {
			names = append(names, fi.Name)
		}
	}
	if err != nil || strings.Join(names, " ") != bootFile+" "+id {
		t.Fatalf("ListDir(.agentkernel/ops) = %v, %v; want the boot file and the op", names, err)
	}
	if _, err := c.ReadFileMax(ctx, ".agentkernel/ops/"+id+"/accepted", 1<<20); err != nil {
		t.Fatalf("ReadFile of the accepted record: %v", err)
	}
}

// TestOpBareDirIsAccepted: the op's directory alone is the acceptance
// (the accepted file in it is written without an fsync of its own, so a
// crash may lose it); a new guest must still refuse to run the op.
func TestOpBareDirIsAccepted(t *testing.T) {
	first, work := startGuest(t, nil)
	ctx := context.Background()
	id := testOpID(30)
	if _, err := first.Exec(ctx, ExecRequest{OpID: id, Shell: `echo run >> log`}, nil); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"result.json", "accepted"} {
		if err := os.Remove(opRecordPath(work, id, name)); err != nil {
			t.Fatal(err)
		}
	}
	second, _ := startGuest(t, func(cfg *Config) { cfg.WorkDir = work })
	if st := mustOp(t, second, id); st.State != OpStateAcceptedGone {
		t.Fatalf("op with a bare record dir: %+v, want accepted_gone", st)
	}
	_, err := second.Exec(ctx, ExecRequest{OpID: id, Shell: `echo run >> log`}, nil)
	mustOpExists(t, err, OpStateAcceptedGone)
	if b, _ := os.ReadFile(filepath.Join(work, "log")); string(b) != "run\n" {
		t.Fatalf("log = %q: the op must run once", b)
	}
}

// TestOpTornResultIsAcceptedGone: a result.json torn by a machine crash
// before its fsync (it is renamed into place first, see writeRecord) was
// never reported, so the op reads as accepted_gone, not as an error.
func TestOpTornResultIsAcceptedGone(t *testing.T) {
	first, work := startGuest(t, nil)
	ctx := context.Background()
	id := testOpID(31)
	if _, err := first.Exec(ctx, ExecRequest{OpID: id, Shell: `echo run >> log`}, nil); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(opRecordPath(work, id, "result.json"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	second, _ := startGuest(t, func(cfg *Config) { cfg.WorkDir = work })
	if st := mustOp(t, second, id); st.State != OpStateAcceptedGone || st.Result != nil {
		t.Fatalf("op with an empty result.json: %+v, want accepted_gone", st)
	}
	_, err := second.Exec(ctx, ExecRequest{OpID: id, Shell: `echo run >> log`}, nil)
	mustOpExists(t, err, OpStateAcceptedGone)
	if b, _ := os.ReadFile(filepath.Join(work, "log")); string(b) != "run\n" {
		t.Fatalf("log = %q: the op must run once", b)
	}
}

// opTableOnBoot is an op table over dir as a guest on the given boot
// ("" = the boot id cannot be read) sees it.
func opTableOnBoot(dir, boot string) *opTable {
	t := newOpTable(dir, time.Now, slog.New(slog.DiscardHandler))
	t.bootID = func() string { return boot }
	return t
}

// newOpTableOnBoot is opTableOnBoot whose background work ends with the
// test.
func newOpTableOnBoot(tb testing.TB, dir, boot string) *opTable {
	ops := opTableOnBoot(dir, boot)
	tb.Cleanup(ops.wait)
	return ops
}

// runOp accepts and finishes op id on t.
func runOp(t *testing.T, ops *opTable, dir, id string) {
	t.Helper()
	if err := ops.accept(id, &command{argv: []string{"true"}, dir: dir}); err != nil {
		t.Fatalf("accept %s: %v", id, err)
	}
	ops.finish(id, OpResult{ExitCode: 0, Stdout: []byte(id)})
}

func opState(t *testing.T, ops *opTable, id string) OpStatus {
	t.Helper()
	st, _, err := ops.status(id)
	if err != nil {
		t.Fatalf("status %s: %v", id, err)
	}
	return st
}

// Within one boot the records need no fsync: a killed guest (or daemon)
// leaves them in the page cache, where the next guest reads them. The
// boot is named durably in ops/boot first.
func TestOpRecordsOfOneBootNeedNoFsync(t *testing.T) {
	dir := t.TempDir()
	first := newOpTableOnBoot(t, dir, "boot-a")
	for i := range 3 {
		runOp(t, first, dir, testOpID(i))
	}
	if n := first.acceptSync.syncs; n != 0 {
		t.Fatalf("%d fsyncs of ops/ for acceptances within one boot, want none", n)
	}
	if b, err := os.ReadFile(filepath.Join(dir, opsDir, bootFile)); err != nil || string(b) != "boot-a\n" {
		t.Fatalf("ops/boot = %q, %v; want the boot named", b, err)
	}
	// The next guest of the same boot: the records are there, an op it
	// has no record of never ran.
	second := newOpTableOnBoot(t, dir, "boot-a")
	if st := opState(t, second, testOpID(1)); st.State != OpStateFinished || string(st.Result.Stdout) != testOpID(1) {
		t.Fatalf("finished op after a restart within the boot: %+v", st)
	}
	if st := opState(t, second, testOpID(9)); st.State != OpStateUnknown {
		t.Fatalf("never-seen op within the boot: %+v, want unknown", st)
	}
}

// After the machine went down, records written without an fsync may be
// gone: an op the new boot's guest has no record of may have run, so it
// is accepted_gone (never re-run blindly) — for every later guest too —
// while a new op id is accepted and runs.
func TestOpUnknownAfterAnotherBootIsAmbiguous(t *testing.T) {
	dir := t.TempDir()
	runOp(t, newOpTableOnBoot(t, dir, "boot-a"), dir, testOpID(1))

	after := newOpTableOnBoot(t, dir, "boot-b")
	if st := opState(t, after, testOpID(1)); st.State != OpStateFinished {
		t.Fatalf("a record that survived: %+v, want finished", st)
	}
	if st := opState(t, after, testOpID(2)); st.State != OpStateAcceptedGone {
		t.Fatalf("an op with no record after another boot: %+v, want accepted_gone", st)
	}
	runOp(t, after, dir, testOpID(3))
	if st := opState(t, after, testOpID(3)); st.State != OpStateFinished {
		t.Fatalf("a new op after another boot: %+v, want it run", st)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, opsDir, bootFile)); string(b) != "boot-b unsure\n" {
		t.Fatalf("ops/boot = %q, want the new boot and unsure", b)
	}
	// A later guest of the same boot still cannot know what boot-a lost.
	if st := opState(t, newOpTableOnBoot(t, dir, "boot-b"), testOpID(4)); st.State != OpStateAcceptedGone {
		t.Fatalf("an op with no record, next guest: %+v, want accepted_gone", st)
	}
}

// Records of a guest that fsynced each one (no ops/boot) were all durable:
// nothing was lost, so an op without a record never ran. A guest that
// cannot read the boot id fsyncs every record, as before.
func TestOpRecordsWithoutABootFile(t *testing.T) {
	dir := t.TempDir()
	durable := newOpTableOnBoot(t, dir, "")
	runOp(t, durable, dir, testOpID(1))
	if n := durable.acceptSync.syncs; n != 1 {
		t.Fatalf("%d fsyncs of ops/ for an acceptance without a boot id, want 1", n)
	}
	if _, err := os.Stat(filepath.Join(dir, opsDir, bootFile)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("ops/boot written without a boot id: %v", err)
	}
	next := newOpTableOnBoot(t, dir, "boot-a")
	if st := opState(t, next, testOpID(2)); st.State != OpStateUnknown {
		t.Fatalf("an op with no record among durable records: %+v, want unknown", st)
	}
	// A boot-a record, then a guest that cannot read the boot id: what
	// boot-a wrote may be lost for all it knows.
	runOp(t, next, dir, testOpID(3))
	if st := opState(t, newOpTableOnBoot(t, dir, ""), testOpID(4)); st.State != OpStateAcceptedGone {
		t.Fatalf("an op with no record, boot unknown after a lazy boot: %+v, want accepted_gone", st)
	}
}

// ops/boot is the sandbox's to write: garbage or a huge file reads as
// another boot (unsure), never more than its first bytes.
func TestOpBootFileFromTheSandbox(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, opsDir), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, opsDir, bootFile), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, opsDir, bootFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 40); err != nil { // sparse: 1 TiB of zeros
		t.Fatal(err)
	}
	f.Close()
	ops := newOpTableOnBoot(t, dir, "boot-a")
	if st := opState(t, ops, testOpID(1)); st.State != OpStateAcceptedGone {
		t.Fatalf("op after a garbage ops/boot: %+v, want accepted_gone", st)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, opsDir, bootFile)); string(b) != "boot-a unsure\n" {
		t.Fatalf("ops/boot = %q after garbage", b)
	}
}

// Within a boot an acceptance takes a spare op directory made ahead of
// need (a rename, no new file on the call's path), fills in its accepted
// record, and the spare is made again; a spare is never renamed over an
// op directory that is already there.
func TestOpSpareDirectories(t *testing.T) {
	dir := t.TempDir()
	ops := newOpTableOnBoot(t, dir, "boot-a")
	if st := opState(t, ops, testOpID(1)); st.State != OpStateUnknown {
		t.Fatalf("%+v", st)
	}
	ops.wait()
	spares := func() []string {
		m, _ := filepath.Glob(filepath.Join(dir, opsDir, sparePrefix+"*"))
		return m
	}
	if n := len(spares()); n != numSpares {
		t.Fatalf("%d spares made, want %d", n, numSpares)
	}
	inodes := map[uint64]bool{}
	for _, p := range spares() {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		inodes[fi.Sys().(*syscall.Stat_t).Ino] = true
	}
	runOp(t, ops, dir, testOpID(1))
	ops.wait()
	fi, err := os.Stat(filepath.Join(dir, opsDir, testOpID(1)))
	if err != nil || !inodes[fi.Sys().(*syscall.Stat_t).Ino] {
		t.Fatalf("the op's directory is not one of the spares: %v", err)
	}
	if n := len(spares()); n != numSpares {
		t.Fatalf("%d spares after an acceptance, want the one taken made again", n)
	}
	if b, err := os.ReadFile(filepath.Join(dir, opsDir, testOpID(1), "accepted")); err != nil || !strings.Contains(string(b), testOpID(1)) {
		t.Fatalf("accepted record %q, %v", b, err)
	}
	if st := opState(t, newOpTableOnBoot(t, dir, "boot-a"), testOpID(1)); st.State != OpStateFinished || string(st.Result.Stdout) != testOpID(1) {
		t.Fatalf("op from a spare, in the next guest: %+v", st)
	}

	// An op directory that appeared after the check (the sandbox's, or
	// an earlier guest's bare acceptance) is not replaced.
	id := testOpID(2)
	if err := os.MkdirAll(filepath.Join(dir, opsDir, id, "mine"), 0o700); err != nil {
		t.Fatal(err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	ops.mu.Lock()
	ok, err := ops.acceptSpare(root, id, []byte("{}"))
	ops.mu.Unlock()
	ops.wait()
	if ok || !errors.Is(err, os.ErrExist) {
		t.Fatalf("acceptSpare over an existing op directory = %v, %v; want refused", ok, err)
	}
	if _, err := os.Stat(filepath.Join(dir, opsDir, id, "mine")); err != nil {
		t.Fatalf("the existing op directory was replaced: %v", err)
	}
}
