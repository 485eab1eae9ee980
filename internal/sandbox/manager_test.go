package sandbox_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/process"
	"github.com/agentkernel/agentkernel/internal/sandbox/sandboxtest"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

var (
	guestOnce sync.Once
	guestBin  string
)

type env struct {
	m      *sandbox.Manager
	cfg    sandbox.ManagerConfig
	st     store.Store
	clock  *clock.Fake
	reaped chan sandbox.ReapReport
	faults *sandbox.Faults
}

// restart simulates a daemon restart: a new manager on the same store and
// directories, with new drivers, recovering what runs.
func (e *env) restart(t *testing.T) sandbox.RecoverReport {
	t.Helper()
	e.m.Close()
	drv, err := process.New(process.Config{})
	if err != nil {
		t.Fatal(err)
	}
	cfg := e.cfg
	cfg.Drivers = map[string]sandbox.Driver{"process": drv}
	cfg.Registry = nil
	if e.m, err = sandbox.NewManager(cfg); err != nil {
		t.Fatal(err)
	}
	rep, err := e.m.Recover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func newEnv(t *testing.T) *env { return newEnvTB(t) }

func newBenchEnv(b *testing.B) *env { return newEnvTB(b) }

func newEnvTB(t testing.TB) *env {
	t.Helper()
	guestOnce.Do(func() {
		// Outlives the first test: every test and benchmark reuses it.
		dir, err := testenv.ProcessTempDir("akguest")
		if err != nil {
			t.Fatal(err)
		}
		src := sandboxtest.BuildGuest(t)
		guestBin = filepath.Join(dir, "guest")
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(guestBin, b, 0o755); err != nil {
			t.Fatal(err)
		}
	})
	ctx := context.Background()
	home := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	blobs, err := fsblob.Open(ctx, filepath.Join(home, "blobs"), fsblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blobs.Close() })
	drv, err := process.New(process.Config{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.MkdirTemp("", "akm")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	e := &env{st: st, clock: clock.NewFake(time.Now()), reaped: make(chan sandbox.ReapReport), faults: &sandbox.Faults{}}
	e.cfg = sandbox.ManagerConfig{
		Store: st, Blobs: blobs, Drivers: map[string]sandbox.Driver{"process": drv},
		GuestBinary: guestBin, DataDir: filepath.Join(home, "sandboxes"), RunDir: run,
		DefaultSleepAfter: time.Minute, ReapInterval: 10 * time.Second,
		Clock: e.clock, Reaped: e.reaped, Faults: e.faults, MarkerTTL: -1,
	}
	m, err := sandbox.NewManager(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	t.Cleanup(func() {
		m := e.m // the last one, after restarts
		m.Stop()
		list, _ := m.List(context.Background(), "", "")
		for _, in := range list {
			_, _ = m.Destroy(context.Background(), "", in.ID)
		}
		m.Close()
	})
	return e
}

func (e *env) exec(t *testing.T, id, cmd string) string {
	t.Helper()
	var out []byte
	res, err := e.m.Exec(context.Background(), "t1", id, guest.ExecRequest{Shell: cmd}, func(_ string, b []byte) { out = append(out, b...) })
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d: %s", cmd, res.ExitCode, out)
	}
	return string(out)
}

func (e *env) state(t *testing.T, id string) sandbox.State {
	t.Helper()
	in, err := e.m.Get(context.Background(), "t1", id)
	if err != nil {
		t.Fatal(err)
	}
	return in.State
}

// randomTree writes nested dirs, an empty dir, symlinks, modes and n bytes.
func randomTree(t *testing.T, dir string, n int) {
	t.Helper()
	r := rand.New(rand.NewPCG(42, 7))
	for i := 0; n > 0; i++ {
		sub := filepath.Join(dir, fmt.Sprintf("d%d", i%5), fmt.Sprintf("e%d", i%3))
		if err := os.MkdirAll(sub, 0o755); err != nil {
			t.Fatal(err)
		}
		size := min(n, r.IntN(3<<20)+1)
		b := make([]byte, size)
		for j := range b {
			b[j] = byte(r.IntN(8)) + 'a'
		}
		p := filepath.Join(sub, fmt.Sprintf("f%d", i))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		if i%4 == 0 {
			os.Chmod(p, 0o600)
		}
		n -= size
	}
	os.MkdirAll(filepath.Join(dir, "empty", "deeper"), 0o700)
	os.Symlink("d0", filepath.Join(dir, "link-in"))
	os.Symlink("/etc/hostname", filepath.Join(dir, "link-out"))
}

// fingerprint hashes every entry: nothing of the runtime (such as a
// generation stamp) may appear in or change the workspace.
func fingerprint(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, _ := os.Lstat(p)
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			l, _ := os.Readlink(p)
			out[rel] = "link:" + l
		case fi.IsDir():
			out[rel] = "dir:" + fi.Mode().String()
		default:
			b, _ := os.ReadFile(p)
			out[rel] = fmt.Sprintf("%s:%x", fi.Mode(), sha256.Sum256(b))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t *testing.T, want, got map[string]string) {
	t.Helper()
	if len(want) != len(got) {
		t.Errorf("tree has %d entries, want %d", len(got), len(want))
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: got %q want %q", k, got[k], v)
		}
	}
}

// TestHibernateWakeRoundTripTwice: the workspace survives two hibernate /
// wake cycles byte for byte, both when it stays on disk and when it has to
// be restored from the backup.
func TestHibernateWakeRoundTripTwice(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if in.State != sandbox.StateActive {
		t.Fatalf("created sandbox is %s", in.State)
	}
	ws := e.m.WorkspaceDir(in.ID)
	randomTree(t, ws, 50<<20)
	e.exec(t, in.ID, "echo from-inside > /workspace/inside.txt")
	want := fingerprint(t, ws)

	for round := 1; round <= 2; round++ {
		if _, err := e.m.Hibernate(ctx, "t1", in.ID); err != nil {
			t.Fatalf("round %d: hibernate: %v", round, err)
		}
		if s := e.state(t, in.ID); s != sandbox.StateCold {
			t.Fatalf("round %d: after hibernate: %s", round, s)
		}
		if round == 2 {
			// The host lost the workspace: wake must restore the backup.
			if err := os.RemoveAll(ws); err != nil {
				t.Fatal(err)
			}
		}
		if got := e.exec(t, in.ID, "cat /workspace/inside.txt"); got != "from-inside\n" {
			t.Fatalf("round %d: inside.txt = %q", round, got)
		}
		if s := e.state(t, in.ID); s != sandbox.StateActive {
			t.Fatalf("round %d: after wake: %s", round, s)
		}
		sameTree(t, want, fingerprint(t, ws))
	}
	bs, err := e.m.Backups(ctx, "t1", in.ID)
	if err != nil || len(bs) != 2 {
		t.Fatalf("backups: %d %v", len(bs), err)
	}
}

// TestSurvivingWorkspaceIsNotOverwrittenByOlderBackup: changes made after
// the last backup survive a recycle of the sandbox (the warm marker is gone,
// the workspace on disk is newer than the backup).
func TestSurvivingWorkspaceIsNotOverwrittenByOlderBackup(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(t, in.ID, "echo v1 > /workspace/state")
	if _, err := e.m.Hibernate(ctx, "t1", in.ID); err != nil {
		t.Fatal(err)
	}
	e.exec(t, in.ID, "echo v2 > /workspace/state") // newer than the backup
	// Recycle: the sandbox restarts behind our back (its /tmp marker is gone).
	e.exec(t, in.ID, "rm /tmp/.agentkernel-warm")
	if got := e.exec(t, in.ID, "cat /workspace/state"); got != "v2\n" {
		t.Fatalf("after recycle: state = %q, want v2 (an older backup overwrote the workspace)", got)
	}
}

func TestIdleReaperHonoursActivityAndBackgroundWork(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	if err := e.m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1", SleepAfter: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	tick := func(d time.Duration) sandbox.ReapReport {
		t.Helper()
		e.clock.BlockUntilWaiting(1)
		e.clock.Advance(d)
		return <-e.reaped
	}
	// 40 s idle: below sleep_after.
	if r := tick(40 * time.Second); len(r.Hibernated) != 0 {
		t.Fatalf("hibernated too early: %+v", r)
	}
	e.exec(t, in.ID, "true") // activity renews sleep_after
	if r := tick(40 * time.Second); len(r.Hibernated) != 0 {
		t.Fatalf("activity did not renew sleep_after: %+v", r)
	}
	// A background process keeps it awake past sleep_after…
	if _, err := e.m.StartProcess(ctx, "t1", in.ID, guest.ExecRequest{Shell: "sleep 100000"}); err != nil {
		t.Fatal(err)
	}
	if r := tick(5 * time.Minute); len(r.KeptAlive) != 1 || len(r.Hibernated) != 0 {
		t.Fatalf("background work did not keep it alive: %+v", r)
	}
	// …but only for 30 minutes.
	if r := tick(31 * time.Minute); len(r.Hibernated) != 1 {
		t.Fatalf("background cap not applied: %+v", r)
	}
	if s := e.state(t, in.ID); s != sandbox.StateCold {
		t.Fatalf("state %s", s)
	}
	bs, _ := e.m.Backups(ctx, "t1", in.ID)
	if len(bs) != 1 {
		t.Fatalf("hibernation without a backup: %d backups", len(bs))
	}
	// Backups expire after their TTL (7 days) and their blobs go too.
	if r := tick(8 * 24 * time.Hour); r.BackupsExpired != 1 {
		t.Fatalf("backup not expired: %+v", r)
	}
}

func TestFailedSnapshotNeverStops(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(t, in.ID, "echo keep > /workspace/f")
	if _, err := e.m.Hibernate(ctx, "t1", in.ID); err != nil {
		t.Fatal(err)
	}
	e.exec(t, in.ID, "echo running > /tmp/alive")
	boom := errors.New("disk on fire")
	e.faults.BeforeSnapshotVerify = func(string) error { return boom }
	if _, err := e.m.Hibernate(ctx, "t1", in.ID); !errors.Is(err, boom) {
		t.Fatalf("hibernate with a failing snapshot: %v", err)
	}
	e.faults.BeforeSnapshotVerify = nil
	if s := e.state(t, in.ID); s != sandbox.StateActive {
		t.Fatalf("state after failed snapshot: %s", s)
	}
	// Same instance still running: its /tmp is intact.
	if got := e.exec(t, in.ID, "cat /tmp/alive"); got != "running\n" {
		t.Fatalf("sandbox was stopped: %q", got)
	}
	bs, _ := e.m.Backups(ctx, "t1", in.ID)
	if len(bs) != 1 {
		t.Fatalf("backups = %d, want the one earlier backup", len(bs))
	}
}

func TestTenantIsolationAndErrors(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Get(ctx, "t2", in.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other tenant: %v", err)
	}
	if _, err := e.m.Exec(ctx, "t2", in.ID, guest.ExecRequest{Shell: "true"}, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("other tenant exec: %v", err)
	}
	if _, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1", Driver: "vmware"}); !errors.Is(err, sandbox.ErrUnknownDriver) {
		t.Fatalf("unknown driver: %v", err)
	}
	if _, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1", Image: "no-such-image"}); !errors.Is(err, sandbox.ErrUnknownImage) {
		t.Fatalf("unknown image: %v", err)
	}
	res, err := e.m.Exec(ctx, "t1", in.ID, guest.ExecRequest{Argv: []string{"/no/such/binary"}}, nil)
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("missing binary: %+v %v", res, err)
	}
	if _, err := e.m.Destroy(ctx, "t1", in.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Exec(ctx, "t1", in.ID, guest.ExecRequest{Shell: "true"}, nil); !errors.Is(err, sandbox.ErrDestroyed) {
		t.Fatalf("exec after destroy: %v", err)
	}
	bs, _ := e.m.Backups(ctx, "t1", in.ID)
	if len(bs) != 1 {
		t.Fatalf("destroy must take a final snapshot: %d backups", len(bs))
	}
}

// A restarted daemon reattaches to its sandboxes (the handle carries the
// secret), but a sandbox whose handle has no secret was started by an
// earlier version, when it could redirect the daemon's socket: it is
// stopped and started afresh, never trusted. Its workspace survives.
func TestRecoverRestartsSandboxesWithoutASecret(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	var ids []string
	for range 2 {
		in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
		if err != nil {
			t.Fatal(err)
		}
		e.exec(t, in.ID, "echo instance > /tmp/marker; echo kept > /workspace/kept")
		ids = append(ids, in.ID)
	}
	// The second one's handle as an earlier version wrote it.
	sb, err := e.st.GetSandbox(ctx, ids[1])
	if err != nil {
		t.Fatal(err)
	}
	var h map[string]any
	if err := json.Unmarshal(sb.Handle, &h); err != nil {
		t.Fatal(err)
	}
	delete(h, "secret")
	sb.Handle, _ = json.Marshal(h)
	if _, err := e.st.UpdateSandbox(ctx, sb); err != nil {
		t.Fatal(err)
	}
	oldPID := guestPID(t, sb.Handle)

	rep := e.restart(t)
	if rep.Reattached != 1 || rep.MarkedCold != 1 {
		t.Fatalf("recover: %+v, want one reattached and one restarted", rep)
	}
	if got := e.exec(t, ids[0], "cat /tmp/marker"); got != "instance\n" {
		t.Fatalf("the sandbox with a secret was not reattached: %q", got)
	}
	if _, err := os.Stat(fmt.Sprintf("/proc/%d", oldPID)); err == nil {
		t.Errorf("the untrusted instance (pid %d) still runs", oldPID)
	}
	if got := e.exec(t, ids[1], "cat /tmp/marker 2>/dev/null; cat /workspace/kept"); got != "kept\n" {
		t.Fatalf("after the restart: %q, want a fresh instance with the workspace kept", got)
	}
}

func guestPID(t *testing.T, handle []byte) int {
	t.Helper()
	var h sandbox.Handle
	var st struct {
		PID int `json:"pid"`
	}
	if err := json.Unmarshal(handle, &h); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(h.State, &st); err != nil || st.PID == 0 {
		t.Fatalf("handle %s: %v", handle, err)
	}
	return st.PID
}

// The guest's records of journalled commands are not in the workspace but
// beside it, and they are backed up and restored with it: after the host
// lost both, a woken sandbox still knows the op ran and what it returned.
func TestOpRecordsLiveBesideTheWorkspaceAndSurviveRestore(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	op := "op_00000000000000000000000000000001"
	res, err := e.m.Exec(ctx, "t1", in.ID, guest.ExecRequest{OpID: op, Shell: "echo did-it"}, nil)
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("journalled exec: %+v %v", res, err)
	}
	if got := e.exec(t, in.ID, "find /workspace"); got != "/workspace\n" {
		t.Fatalf("the workspace holds %q", got)
	}
	if _, err := e.m.Hibernate(ctx, "t1", in.ID); err != nil {
		t.Fatal(err)
	}
	ws := e.m.WorkspaceDir(in.ID)
	for _, d := range []string{ws, filepath.Join(filepath.Dir(ws), "runtime")} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	var st *guest.OpStatus
	if err := e.m.Client(ctx, "t1", in.ID, func(c *guest.Client) error {
		var err error
		st, err = c.Op(ctx, op)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if st.State != guest.OpStateFinished || string(st.Result.Stdout) != "did-it\n" {
		t.Fatalf("op after restore: %+v", st)
	}
	if got := e.exec(t, in.ID, "find /workspace"); got != "/workspace\n" {
		t.Fatalf("after restore the workspace holds %q", got)
	}
}

// An instance that still runs but does not answer when a restarted daemon
// reattaches is stopped before a new one starts in its place: forgetting it
// would leave it running unseen.
func TestRecoverStopsAnInstanceThatDoesNotAnswer(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	e.cfg.StopTimeout = 100 * time.Millisecond
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(t, in.ID, "echo kept > /workspace/kept")
	sb, err := e.st.GetSandbox(ctx, in.ID)
	if err != nil {
		t.Fatal(err)
	}
	pid := guestPID(t, sb.Handle)
	// Alive, but it will never answer the health probe.
	if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	defer syscall.Kill(pid, syscall.SIGKILL)
	waitStopped(t, pid)

	if rep := e.restart(t); rep.MarkedCold != 1 {
		t.Fatalf("recover: %+v, want the silent instance marked cold", rep)
	}
	// Stop returns once the guest is dead; its parent may take a moment
	// to reap it, so a zombie counts as stopped.
	if state := procState(pid); state != "" && state != "Z" && state != "X" {
		t.Fatalf("the instance that did not answer (pid %d) still runs (state %s)", pid, state)
	}
	if got := e.exec(t, in.ID, "cat /workspace/kept"); got != "kept\n" {
		t.Fatalf("after the restart: %q, want the workspace kept", got)
	}
}

// The warm marker is the sandbox's to overwrite: a huge (sparse) one is
// refused by size, never read into the daemon, and the sandbox is warmed
// again as if the marker were missing.
func TestHugeWarmMarkerIsNotReadIntoTheDaemon(t *testing.T) {
	ctx := context.Background()
	e := newEnv(t)
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
	if err != nil {
		t.Fatal(err)
	}
	e.exec(t, in.ID, "truncate -s 1T "+sandbox.WarmMarkerPath)
	if got := e.exec(t, in.ID, "stat -c %s "+sandbox.WarmMarkerPath); strings.TrimSpace(got) == "1099511627776" {
		t.Fatalf("the marker was not written again after a huge one: %s bytes", strings.TrimSpace(got))
	}
}

// procState is the state letter of pid ("" when it is gone).
func procState(pid int) string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	i := strings.LastIndexByte(string(b), ')')
	if err != nil || i < 0 || i+2 >= len(b) {
		return ""
	}
	return string(b[i+2])
}

// waitStopped waits until every thread of pid is stopped (SIGSTOP is
// delivered asynchronously: a thread may still answer for a moment).
func waitStopped(t *testing.T, pid int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		stats, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		stopped := len(stats) > 0
		for _, p := range stats {
			b, err := os.ReadFile(p)
			// The state follows the command name in parentheses.
			if i := strings.LastIndexByte(string(b), ')'); err != nil || i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
				stopped = false
			}
		}
		if stopped {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("pid %d did not stop", pid)
		}
		time.Sleep(time.Millisecond)
	}
}
