package monitor_test

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/monitor"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/process"
	"github.com/agentkernel/agentkernel/internal/sandbox/sandboxtest"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Main(m)) }

var (
	binOnce            sync.Once
	guestBin, agentBin string
	binErr             error
)

// binaries builds the static guest and agentkernel-agent once per process.
func binaries(t testing.TB) (string, string) {
	t.Helper()
	binOnce.Do(func() {
		dir, err := testenv.ProcessTempDir("akmon")
		if err != nil {
			binErr = err
			return
		}
		src := sandboxtest.BuildGuest(t)
		b, err := os.ReadFile(src)
		if err != nil {
			binErr = err
			return
		}
		guestBin = filepath.Join(dir, "guest")
		if binErr = os.WriteFile(guestBin, b, 0o755); binErr != nil {
			return
		}
		agentBin = filepath.Join(dir, "agentkernel-agent")
		cmd := exec.Command("go", "build", "-o", agentBin, "github.com/agentkernel/agentkernel/cmd/agentkernel-agent")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binErr = errors.New(string(out))
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return guestBin, agentBin
}

type env struct {
	t     testing.TB
	st    *sqlite.Store
	mgr   *sandbox.Manager
	blobs blob.Store
	clock *clock.Fake
	sbx   monitor.Sandboxes
}

func newEnv(t testing.TB) *env {
	t.Helper()
	gb, ab := binaries(t)
	ctx := context.Background()
	home := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	blobs, err := fsblob.Open(ctx, filepath.Join(home, "blobs"), fsblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	drv, err := process.New(process.Config{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.MkdirTemp("", "akmr")
	if err != nil {
		t.Fatal(err)
	}
	// Whole seconds: the store keeps microseconds, so durations stay exact.
	fc := clock.NewFake(time.Now().Truncate(time.Second))
	mgr, err := sandbox.NewManager(sandbox.ManagerConfig{
		Store: st, Blobs: blobs, Drivers: map[string]sandbox.Driver{"process": drv},
		GuestBinary: gb, DataDir: filepath.Join(home, "sandboxes"), RunDir: run, Clock: fc, MarkerTTL: -1,
	})
	if err != nil {
		t.Fatal(err)
	}
	// The stand-alone agent CLI, where the wrapper looks for it first.
	mgr.AddHooks(sandbox.Hooks{Mounts: func(*store.Sandbox) []sandbox.Mount {
		return []sandbox.Mount{{Source: ab, Target: monitor.AgentBinaryPath, ReadOnly: true}}
	}})
	t.Cleanup(func() {
		list, _ := mgr.List(context.Background(), "", "")
		for _, in := range list {
			_, _ = mgr.Destroy(context.Background(), "", in.ID)
		}
		mgr.Close()
		blobs.Close()
		st.Close()
		os.RemoveAll(run)
	})
	return &env{t: t, st: st, mgr: mgr, blobs: blobs, clock: fc, sbx: mgr}
}

func (e *env) service(mod func(*monitor.Config)) *monitor.Service {
	e.t.Helper()
	cfg := monitor.Config{Store: e.st, Sandboxes: e.sbx, Clock: e.clock, Node: "test", PullWait: time.Second}
	if os.Getenv("AGENTKERNEL_TEST_LOG") != "" {
		cfg.Log = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	if mod != nil {
		mod(&cfg)
	}
	s, err := monitor.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(s.Stop)
	return s
}

// runAgent starts a task running script (a /bin/sh agent) and waits until
// it runs.
func (e *env) runAgent(s *monitor.Service, script string, mod func(*monitor.CreateTaskParams)) *store.Task {
	e.t.Helper()
	p := monitor.CreateTaskParams{TenantID: "ten_test", Command: []string{"/bin/sh", "-c", script}}
	if mod != nil {
		mod(&p)
	}
	task, err := s.CreateTask(context.Background(), p)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.waitTask(task.ID, func(t *store.Task) bool {
		return t.Status != store.TaskPending && t.Status != store.TaskClaiming && t.Status != store.TaskAssigned
	})
}

func (e *env) waitTask(id string, ok func(*store.Task) bool) *store.Task {
	e.t.Helper()
	var last *store.Task
	waitFor(e.t, "task "+id, func() bool {
		t, err := e.st.GetTask(context.Background(), id)
		last = t
		return err == nil && ok(t)
	})
	return last
}

// activity waits until the sandbox's summary satisfies ok.
func (e *env) activity(sbx string, ok func(*store.AgentActivity) bool) *store.AgentActivity {
	e.t.Helper()
	var last *store.AgentActivity
	waitFor(e.t, "activity of "+sbx, func() bool {
		a, err := e.st.GetActivity(context.Background(), sbx)
		last = a
		return err == nil && ok(a)
	})
	return last
}

// advance moves the fake clock in steps no longer than step and, after
// each, waits for a heartbeat stamped at the new time: the agent is alive
// in fake time as it is in real time.
func (e *env) advance(sbx string, total, step time.Duration) {
	e.t.Helper()
	for total > 0 {
		d := min(step, total)
		e.clock.Advance(d)
		total -= d
		// The store keeps microseconds.
		now := e.clock.Now().Truncate(time.Microsecond)
		e.activity(sbx, func(a *store.AgentActivity) bool { return a.LastHeartbeatAt != nil && !a.LastHeartbeatAt.Before(now) })
	}
}

func waitFor(t testing.TB, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// heartbeatLoop is shell that keeps an agent alive with a status.
func heartbeatLoop(status string) string {
	return "(while :; do agentkernel-agent heartbeat " + status + "; sleep 0.2; done) &\n"
}

func script(lines ...string) string { return "set -e\n" + strings.Join(lines, "\n") + "\n" }
