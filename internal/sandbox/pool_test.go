package sandbox_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/process"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// newPoolEnv is newEnv with a warm pool of n per shape, started and full.
func newPoolEnv(t testing.TB, n int) *env {
	t.Helper()
	e := newEnvTB(t)
	e.m.Close()
	e.cfg.WarmPool = n
	cfg := e.cfg
	cfg.Registry = nil
	m, err := sandbox.NewManager(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.m = m
	if err := m.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitPool(t, m)
	return e
}

func waitPool(t testing.TB, m *sandbox.Manager) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := m.WaitPool(ctx); err != nil {
		t.Fatalf("the pool did not fill: %v", err)
	}
}

// pooled lists the pooled sandboxes waiting on the host (their slot
// directories) with their guests' pids.
func pooled(t *testing.T, e *env) map[string]int {
	t.Helper()
	dir := filepath.Join(e.cfg.DataDir, ".pool")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]int{}
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int{}
	for _, ent := range ents {
		raw, err := os.ReadFile(filepath.Join(dir, ent.Name(), "handle"))
		if err != nil {
			out[ent.Name()] = 0
			continue
		}
		var h sandbox.Handle
		var st struct {
			PID int `json:"pid"`
		}
		if err := json.Unmarshal(raw, &h); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(h.State, &st); err != nil {
			t.Fatal(err)
		}
		out[ent.Name()] = st.PID
	}
	return out
}

func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] != 'Z'
}

func waitDead(t *testing.T, pids ...int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for _, pid := range pids {
		for alive(pid) {
			if time.Now().After(deadline) {
				t.Fatalf("pooled guest %d still runs", pid)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

func (e *env) execAs(t *testing.T, tenant, id, cmd string) string {
	t.Helper()
	var stdout, stderr []byte
	res, err := e.m.Exec(context.Background(), tenant, id, guest.ExecRequest{Shell: cmd}, func(stream string, b []byte) {
		if stream == "stderr" {
			stderr = append(stderr, b...)
		} else {
			stdout = append(stdout, b...)
		}
	})
	if err != nil {
		t.Fatalf("exec %q: %v", cmd, err)
	}
	if res.ExitCode != 0 {
		t.Fatalf("exec %q: exit %d: %s%s", cmd, res.ExitCode, stdout, stderr)
	}
	return string(stdout)
}

// TestWarmPoolAssignsAPooledSandbox: a wake (and a create) takes a pooled
// sandbox, which then holds the sandbox's workspace — the host directory
// the daemon keeps, with what was in it — its runtime records, and its
// environment; the pool refills, and the sandbox keeps its files across a
// hibernation and a second pooled wake.
func TestWarmPoolAssignsAPooledSandbox(t *testing.T) {
	ctx := context.Background()
	e := newPoolEnv(t, 1)
	e.m.AddHooks(sandbox.Hooks{Env: func(sb *store.Sandbox) map[string]string {
		return map[string]string{"SANDBOX_OWNER": sb.TenantID + "/" + sb.ID}
	}})
	before := pooled(t, e)
	if len(before) != 1 {
		t.Fatalf("%d pooled sandboxes wait, want 1", len(before))
	}
	in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1", Seed: func(_ context.Context, ws string) error {
		return os.WriteFile(filepath.Join(ws, "seeded.txt"), []byte("from the seed\n"), 0o644)
	}})
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimSpace(e.execAs(t, "t1", in.ID, "hostname"))
	var slot string
	for s := range before {
		slot = s
	}
	if host != slot {
		t.Fatalf("the new sandbox runs in %q, not in the pooled sandbox %q", host, slot)
	}
	if got := e.execAs(t, "t1", in.ID, "cat /workspace/seeded.txt"); got != "from the seed\n" {
		t.Fatalf("seeded.txt = %q", got)
	}
	if got := e.execAs(t, "t1", in.ID, `echo "$SANDBOX_OWNER"`); got != "t1/"+in.ID+"\n" {
		t.Fatalf("SANDBOX_OWNER = %q", got)
	}
	e.execAs(t, "t1", in.ID, "echo from-inside > /workspace/inside.txt")
	if b, err := os.ReadFile(filepath.Join(e.m.WorkspaceDir(in.ID), "inside.txt")); err != nil || string(b) != "from-inside\n" {
		t.Fatalf("the sandbox's write is not in its host workspace: %q %v", b, err)
	}
	// The pool refills, with a new sandbox.
	waitPool(t, e.m)
	after := pooled(t, e)
	if _, again := after[slot]; again || len(after) != 1 {
		t.Fatalf("pool after one assignment: %v (the assigned %s must not be in it)", after, slot)
	}
	if _, ok := before[slot]; !ok || !alive(before[slot]) {
		t.Fatalf("the assigned sandbox's guest %d is not running", before[slot])
	}

	// Hibernate: the instance stops (it is not returned to the pool); the
	// next wake takes the next pooled sandbox.
	if _, err := e.m.Hibernate(ctx, "t1", in.ID); err != nil {
		t.Fatal(err)
	}
	waitDead(t, before[slot])
	var next string
	for s := range after {
		next = s
	}
	if got := e.execAs(t, "t1", in.ID, "hostname; cat /workspace/inside.txt /workspace/seeded.txt"); got != next+"\nfrom-inside\nfrom the seed\n" {
		t.Fatalf("after a pooled wake: %q", got)
	}
	// The restored state is the same after a restore from the backup.
	if _, err := e.m.Hibernate(ctx, "t1", in.ID); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(e.m.WorkspaceDir(in.ID)); err != nil {
		t.Fatal(err)
	}
	waitPool(t, e.m)
	if got := e.execAs(t, "t1", in.ID, "cat /workspace/inside.txt"); got != "from-inside\n" {
		t.Fatalf("after a restore and a pooled wake: %q", got)
	}
}

// TestWarmPoolLeavesNothingOfOneTenantToTheNext: what a tenant left in
// its pooled sandbox — files in /workspace and /tmp, a background
// process, its environment — is nowhere in the pooled sandbox the next
// tenant gets, and nothing waits in the pool but empty directories.
func TestWarmPoolLeavesNothingOfOneTenantToTheNext(t *testing.T) {
	ctx := context.Background()
	e := newPoolEnv(t, 1)
	apps := map[string]string{}
	for _, tenant := range []string{"ta", "tb"} {
		apps[tenant] = t.TempDir()
		if err := os.WriteFile(filepath.Join(apps[tenant], "app-of-"+tenant), []byte(tenant+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e.m.AddHooks(sandbox.Hooks{
		Env: func(sb *store.Sandbox) map[string]string {
			return map[string]string{"TENANT_SECRET": "secret-of-" + sb.TenantID}
		},
		// An object class's /app: the tenant's, read-only, attached at
		// assignment.
		Mounts: func(sb *store.Sandbox) []sandbox.Mount {
			return []sandbox.Mount{{Source: apps[sb.TenantID], Target: sandbox.AppPath, ReadOnly: true}}
		},
	})
	a, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "ta"})
	if err != nil {
		t.Fatal(err)
	}
	hostA := e.execAs(t, "ta", a.ID, "hostname")
	if !strings.HasPrefix(hostA, "wrm_") {
		t.Fatalf("tenant A's sandbox is not a pooled one: %q", hostA)
	}
	if got := e.execAs(t, "ta", a.ID, "cat /app/app-of-ta; touch /app/x 2>/dev/null && echo WRITABLE; touch /new 2>/dev/null && echo ROOT-WRITABLE; true"); got != "ta\n" {
		t.Fatalf("tenant A's /app: %q, want its app, read-only, and the root read-only", got)
	}
	e.execAs(t, "ta", a.ID, `echo "$TENANT_SECRET" > /workspace/a.txt; echo "$TENANT_SECRET" > /tmp/a.txt`)
	if _, err := e.m.StartProcess(ctx, "ta", a.ID, guest.ExecRequest{Argv: []string{"sleep", "3600"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.m.Destroy(ctx, "ta", a.ID); err != nil {
		t.Fatal(err)
	}
	waitPool(t, e.m)
	for slot := range pooled(t, e) {
		for _, sub := range []string{"workspace", "runtime"} {
			ents, err := os.ReadDir(filepath.Join(e.cfg.DataDir, ".pool", slot, sub))
			if err != nil || len(ents) != 0 {
				t.Fatalf("pooled %s's %s holds %v (%v)", slot, sub, ents, err)
			}
		}
	}
	b, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "tb"})
	if err != nil {
		t.Fatal(err)
	}
	got := e.execAs(t, "tb", b.ID, `hostname; ls -A /workspace /tmp /app; echo "env=$TENANT_SECRET"; cat /proc/[0-9]*/cmdline | tr '\0' ' '`)
	if !strings.HasPrefix(got, "wrm_") || strings.HasPrefix(got, hostA) {
		t.Fatalf("tenant B's sandbox is not a new pooled one: %q (A's was %q)", got, hostA)
	}
	if strings.Contains(got, "secret-of-ta") || strings.Contains(got, "a.txt") || strings.Contains(got, "sleep 3600") || strings.Contains(got, "app-of-ta") || !strings.Contains(got, "app-of-tb") {
		t.Fatalf("tenant B sees what tenant A left: %q", got)
	}
	if !strings.Contains(got, "env=secret-of-tb") {
		t.Fatalf("tenant B's environment is not set: %q", got)
	}
}

// TestWarmPoolIsBounded: a pool holds warm_pool sandboxes per shape and
// refills to that and no more; shapes get a pool at their first wake, at
// most MaxPoolShapes of them.
func TestWarmPoolIsBounded(t *testing.T) {
	ctx := context.Background()
	e := newPoolEnv(t, 2)
	if shapes, ready := e.m.PoolStats(); shapes != 1 || ready != 2 {
		t.Fatalf("after start: %d shapes, %d ready; want 1 and 2", shapes, ready)
	}
	for i := range 3 {
		in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
		if err != nil {
			t.Fatal(err)
		}
		if h := e.execAs(t, "t1", in.ID, "hostname"); !strings.HasPrefix(h, "wrm_") {
			t.Fatalf("sandbox %d is not pooled: %q", i, h)
		}
		waitPool(t, e.m)
		if n := len(pooled(t, e)); n != 2 {
			t.Fatalf("after %d assignments %d pooled sandboxes wait on the host, want 2", i+1, n)
		}
	}
	// Other shapes (limits) get their own pool, up to the bound.
	for i := range sandbox.MaxPoolShapes + 1 {
		mem := int64(200 + i)
		if _, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1", Cold: true, Limits: sandbox.LimitsRequest{MemoryMB: &mem}}); err != nil {
			t.Fatal(err)
		}
	}
	list, err := e.m.List(ctx, "t1", sandbox.StateCold)
	if err != nil {
		t.Fatal(err)
	}
	for _, in := range list {
		if _, err := e.m.Wake(ctx, "t1", in.ID); err != nil {
			t.Fatal(err)
		}
	}
	waitPool(t, e.m)
	shapes, ready := e.m.PoolStats()
	if shapes != sandbox.MaxPoolShapes || ready != 2*sandbox.MaxPoolShapes {
		t.Fatalf("%d shapes, %d ready; want %d and %d", shapes, ready, sandbox.MaxPoolShapes, 2*sandbox.MaxPoolShapes)
	}
	if n := len(pooled(t, e)); n != 2*sandbox.MaxPoolShapes {
		t.Fatalf("%d pooled sandboxes on the host, want %d", n, 2*sandbox.MaxPoolShapes)
	}
}

// TestWarmPoolEndsWithTheManager: Close ends every pooled sandbox and
// removes its directories.
func TestWarmPoolEndsWithTheManager(t *testing.T) {
	e := newPoolEnv(t, 2)
	slots := pooled(t, e)
	if len(slots) != 2 {
		t.Fatalf("%d pooled, want 2", len(slots))
	}
	e.m.Close()
	for slot, pid := range slots {
		if alive(pid) {
			t.Errorf("pooled guest %d of %s survived Close", pid, slot)
		}
		if _, err := os.Lstat(filepath.Join(e.cfg.RunDir, slot)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("run dir of %s left: %v", slot, err)
		}
	}
	if n := len(pooled(t, e)); n != 0 {
		t.Errorf("%d pooled sandboxes left on the host", n)
	}
}

// TestWarmPoolDiesWithTheDaemon: a daemon killed with SIGKILL leaves no
// pooled sandbox running (each guest ends when its pool pipe closes), and
// the next daemon removes what they left on disk.
func TestWarmPoolDiesWithTheDaemon(t *testing.T) {
	e := newEnv(t)
	cmd := exec.Command(os.Args[0], "-test.run=^TestWarmPoolHelperDaemon$", "-test.v")
	cmd.Env = append(os.Environ(), "AK_POOL_HELPER="+e.cfg.DataDir+"|"+e.cfg.RunDir+"|"+guestBin)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	sc := bufio.NewScanner(out)
	ready := false
	for sc.Scan() {
		if sc.Text() == "POOL READY" {
			ready = true
			break
		}
	}
	if !ready {
		t.Fatal("the helper daemon did not fill its pool")
	}
	slots := pooled(t, e)
	if len(slots) != 2 {
		t.Fatalf("%d pooled, want 2", len(slots))
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	for _, pid := range slots {
		waitDead(t, pid)
	}
	// The next daemon cleans up what they left (cgroups, directories).
	e.restart(t)
	if n := len(pooled(t, e)); n != 0 {
		t.Fatalf("%d pooled sandboxes left on the host after recovery", n)
	}
	for slot := range slots {
		if _, err := os.Lstat(filepath.Join(e.cfg.RunDir, slot)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("run dir of %s left: %v", slot, err)
		}
	}
}

// TestWarmPoolHelperDaemon is TestWarmPoolDiesWithTheDaemon's daemon: a
// manager with a full pool of 2 that waits to be killed.
func TestWarmPoolHelperDaemon(t *testing.T) {
	spec := os.Getenv("AK_POOL_HELPER")
	if spec == "" {
		t.Skip("run by TestWarmPoolDiesWithTheDaemon")
	}
	parts := strings.Split(spec, "|")
	ctx := context.Background()
	home := filepath.Dir(parts[0])
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
	m, err := sandbox.NewManager(sandbox.ManagerConfig{
		Store: st, Blobs: blobs, Drivers: map[string]sandbox.Driver{"process": drv},
		GuestBinary: parts[2], DataDir: parts[0], RunDir: parts[1], WarmPool: 2,
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := m.Start(ctx); err != nil {
		t.Fatal(err)
	}
	waitPool(t, m)
	fmt.Println("POOL READY")
	select {} // until killed
}

// TestWarmPoolAssignmentCutShortIsUndone: a daemon that dies at any step
// of an assignment leaves the sandbox's files where the next daemon puts
// them back: the workspace and runtime dir are whole and in place, the
// generation stamp still vouches for the workspace (no restore of an older
// backup over it), the half-assigned instance is gone, and the sandbox
// wakes with its files.
func TestWarmPoolAssignmentCutShortIsUndone(t *testing.T) {
	for _, step := range []string{"journal", "workspace", "runtime", "rundir", "adopted", "assigned"} {
		t.Run(step, func(t *testing.T) {
			ctx := context.Background()
			e := newPoolEnv(t, 1)
			in, err := e.m.Create(ctx, sandbox.CreateParams{TenantID: "t1"})
			if err != nil {
				t.Fatal(err)
			}
			e.execAs(t, "t1", in.ID, "echo kept > /workspace/kept.txt; mkdir -p /workspace/sub; echo deep > /workspace/sub/deep.txt")
			if _, err := e.m.Hibernate(ctx, "t1", in.ID); err != nil {
				t.Fatal(err)
			}
			// Newer than the backup: a restore would lose it.
			ws := e.m.WorkspaceDir(in.ID)
			if err := os.WriteFile(filepath.Join(ws, "after-backup.txt"), []byte("on disk only\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			want := fingerprint(t, ws)
			waitPool(t, e.m)
			slots := pooled(t, e)
			e.faults.PoolAssign = func(_, s string) error {
				if s == step {
					return errors.New("killed at " + step)
				}
				return nil
			}
			if _, err := e.m.Wake(ctx, "t1", in.ID); err == nil || !strings.Contains(err.Error(), "killed at "+step) {
				t.Fatalf("wake: %v, want the simulated crash", err)
			}
			e.faults.PoolAssign = nil
			e.restart(t)
			for slot, pid := range slots {
				if _, ok := pooled(t, e)[slot]; ok {
					t.Errorf("slot %s of the cut assignment is still there", slot)
				}
				waitDead(t, pid)
			}
			sameTree(t, want, fingerprint(t, ws))
			if got := e.execAs(t, "t1", in.ID, "cat /workspace/kept.txt /workspace/sub/deep.txt /workspace/after-backup.txt"); got != "kept\ndeep\non disk only\n" {
				t.Fatalf("after recovery: %q", got)
			}
		})
	}
}
