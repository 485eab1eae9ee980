package object_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/process"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Main(m)) }

var (
	buildOnce sync.Once
	guestBin  string
	appDir    string
	buildErr  error
)

// builds the static guest and the test counter server (in an app_dir)
// once per test process.
func builds(t testing.TB) (guest, app string) {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := testenv.ProcessTempDir("akobj")
		if err != nil {
			buildErr = err
			return
		}
		appDir = filepath.Join(dir, "app")
		if err := os.MkdirAll(appDir, 0o755); err != nil {
			buildErr = err
			return
		}
		for pkg, out := range map[string]string{
			"github.com/agentkernel/agentkernel/internal/guest/guestmain":         filepath.Join(dir, "guest"),
			"github.com/agentkernel/agentkernel/internal/object/testdata/counter": filepath.Join(appDir, "counter"),
		} {
			cmd := exec.Command("go", "build", "-o", out, pkg)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if b, err := cmd.CombinedOutput(); err != nil {
				buildErr = fmt.Errorf("build %s: %v\n%s", pkg, err, b)
				return
			}
		}
		guestBin = filepath.Join(dir, "guest")
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return guestBin, appDir
}

type env struct {
	rt     *object.Runtime
	st     store.Store
	m      *sandbox.Manager
	clock  *clock.Fake
	swept  chan object.SweepReport
	alarms chan object.AlarmReport
	reg    *prometheus.Registry
	app    string
}

type envOpt func(*object.Config)

func counterClasses(app string) []config.ObjectClassConfig {
	return []config.ObjectClassConfig{
		{Class: "counter", InitCommand: []string{"/app/counter"}, AppDir: app, IdleTimeoutSeconds: 60},
		{Class: "wcounter", InitCommand: []string{"/app/counter"}, AppDir: app, IdleTimeoutSeconds: 60, StorageMode: "write-through"},
		{Class: "broken", InitCommand: []string{"/bin/false"}, AppDir: app},
		// isolation = "class" (issue 15): objects share sandboxes.
		{Class: "ccounter", InitCommand: []string{"/app/counter"}, AppDir: app, IdleTimeoutSeconds: 60, Isolation: "class"},
		{Class: "cwcounter", InitCommand: []string{"/app/counter"}, AppDir: app, IdleTimeoutSeconds: 60, Isolation: "class", StorageMode: "write-through"},
		{Class: "cpair", InitCommand: []string{"/app/counter"}, AppDir: app, Isolation: "class", ObjectsPerSandbox: 2},
		{Class: "csingle", InitCommand: []string{"/app/counter"}, AppDir: app, Isolation: "class", Env: map[string]string{"COUNTER_SINGLE": "1"}},
	}
}

func newEnv(t *testing.T, opts ...envOpt) *env {
	t.Helper()
	guest, app := builds(t)
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
	run, err := os.MkdirTemp("", "akor")
	if err != nil {
		t.Fatal(err)
	}
	e := &env{st: st, clock: clock.NewFake(time.Date(2026, 2, 15, 12, 0, 0, 0, time.UTC)), swept: make(chan object.SweepReport, 100),
		alarms: make(chan object.AlarmReport, 100), reg: prometheus.NewRegistry(), app: app}
	m, err := sandbox.NewManager(sandbox.ManagerConfig{
		Store: st, Blobs: blobs, Drivers: map[string]sandbox.Driver{"process": drv},
		GuestBinary: guest, DataDir: filepath.Join(home, "sandboxes"), RunDir: run,
		Clock: e.clock, Registry: e.reg,
	})
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	lim := config.DefaultDurableObjects()
	lim.AppRoots = []string{app}
	cfg := object.Config{
		Store: st, Sandboxes: m, Classes: counterClasses(app), Limits: lim,
		Clock: e.clock, Registry: e.reg, Swept: e.swept, AlarmDone: e.alarms,
	}
	for _, o := range opts {
		o(&cfg)
	}
	rt, err := object.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.rt = rt
	if err := rt.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		rt.Stop()
		list, _ := m.List(context.Background(), "", "")
		for _, in := range list {
			_, _ = m.Destroy(context.Background(), "", in.ID)
		}
		m.Close()
		blobs.Close()
		st.Close()
		os.RemoveAll(run)
	})
	return e
}

func key(class, id string) store.ObjectKey {
	return store.ObjectKey{TenantID: "t1", Class: class, ID: id}
}

// call calls a method and decodes {"value": N}.
func (e *env) call(t *testing.T, k store.ObjectKey, method string, args any) (int64, error) {
	t.Helper()
	var raw json.RawMessage
	if args != nil {
		raw, _ = json.Marshal(args)
	}
	res, err := e.rt.Call(context.Background(), object.CallParams{TenantID: k.TenantID, Class: k.Class, ID: k.ID, Method: method, Args: raw})
	if err != nil {
		return 0, err
	}
	var v struct{ Value int64 }
	if err := json.Unmarshal(res, &v); err != nil {
		t.Fatalf("%s result %s: %v", method, res, err)
	}
	return v.Value, nil
}

func (e *env) mustCall(t *testing.T, k store.ObjectKey, method string, args any) int64 {
	t.Helper()
	v, err := e.call(t, k, method, args)
	if err != nil {
		t.Fatalf("%s %s: %v", subject(k), method, err)
	}
	return v
}

func subject(k store.ObjectKey) string { return k.Class + "/" + k.ID }

// storedCount is the persisted value of "count".
func (e *env) storedCount(t *testing.T, k store.ObjectKey) int64 {
	t.Helper()
	st, err := e.st.GetObjectStorage(context.Background(), k)
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	if v, ok := st["count"]; ok {
		if err := json.Unmarshal(v, &n); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (e *env) auditKinds(t *testing.T, k store.ObjectKey) []string {
	t.Helper()
	recs, err := e.rt.Audit(context.Background(), store.ListAuditParams{TenantID: k.TenantID})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, r := range recs {
		if r.Subject == subject(k) {
			out = append(out, r.Kind)
		}
	}
	return out
}

// sweep advances the fake clock by d and waits for the idle pass it
// triggers.
func (e *env) sweep(t *testing.T, d time.Duration) object.SweepReport {
	t.Helper()
	e.clock.BlockUntilWaiting(2)
	for len(e.swept) > 0 {
		<-e.swept
	}
	e.clock.Advance(d)
	select {
	case rep := <-e.swept:
		return rep
	case <-time.After(time.Minute):
		t.Fatal("no idle pass")
	}
	return object.SweepReport{}
}
