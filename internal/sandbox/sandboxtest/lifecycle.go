package sandboxtest

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// testLifecycle: start → files in /workspace reach the host → stop → not
// running → start again on the same workspace → the file is still there →
// destroy twice.
func (s *suite) testLifecycle(t *testing.T) {
	ctx := context.Background()
	d := s.h.NewDriver(t)
	dirs := newDirs(t)
	spec := s.spec(t, dirs)
	h, c := start(t, d, spec)

	st, err := d.Inspect(ctx, h)
	if err != nil || !st.Running {
		t.Fatalf("Inspect after start = %+v, %v; want running", st, err)
	}
	if err := c.WriteFile(ctx, guest.WriteFileRequest{Path: sandbox.WorkspacePath + "/notes/hello.txt", Data: []byte("persist me")}); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dirs.workspace, "notes", "hello.txt")); err != nil || string(b) != "persist me" {
		t.Fatalf("host workspace file = %q, %v", b, err)
	}
	// And the other way: a host file is visible inside.
	if err := os.WriteFile(filepath.Join(dirs.workspace, "from-host"), []byte("h"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, _, code := run(t, c, "cat /workspace/from-host && pwd"); out != "h/workspace\n" || code != 0 {
		t.Fatalf("cat from-host = %q (exit %d)", out, code)
	}
	list, err := c.ListDir(ctx, sandbox.WorkspacePath)
	if err != nil || len(list) != 2 {
		t.Fatalf("ListDir = %+v, %v", list, err)
	}
	if err := c.Remove(ctx, guest.RemoveRequest{Path: "from-host"}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Stat(ctx, "from-host"); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Stat after remove: %v", err)
	}

	if err := d.Stop(ctx, h, 10*time.Second); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	if st, err := d.Inspect(ctx, h); err != nil || st.Running {
		t.Fatalf("Inspect after stop = %+v, %v; want not running", st, err)
	}
	if err := d.Stop(ctx, h, time.Second); err != nil {
		t.Fatalf("second Stop: %v", err)
	}
	if _, err := c.Health(ctx); err == nil {
		t.Fatal("guest still answers after Stop")
	}

	h2, c2 := start(t, d, spec)
	b, err := c2.ReadFileMax(ctx, "notes/hello.txt", 1<<20)
	if err != nil || string(b) != "persist me" {
		t.Fatalf("after restart ReadFile = %q, %v", b, err)
	}
	if err := d.Destroy(ctx, h2); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := d.Destroy(ctx, h2); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
	if st, err := d.Inspect(ctx, h2); err == nil && st.Running {
		t.Fatal("running after Destroy")
	}
	if _, err := os.Stat(filepath.Join(dirs.workspace, "notes", "hello.txt")); err != nil {
		t.Fatalf("Destroy must keep WorkspaceDir: %v", err)
	}
}

// testRecover simulates a daemon restart: a new driver instance reattaches
// with only the persisted handle, then the sandbox is stopped and a second
// Recover reports ErrGone.
func (s *suite) testRecover(t *testing.T) {
	ctx := context.Background()
	d := s.h.NewDriver(t)
	h, c := start(t, d, s.spec(t, newDirs(t)))
	if _, _, code := run(t, c, "echo started > /tmp/marker"); code != 0 {
		t.Fatal("write marker failed")
	}
	persisted := roundTrip(t, h)

	d2 := s.h.NewDriver(t)
	if err := d2.Recover(ctx, persisted); err != nil {
		t.Fatalf("Recover live sandbox: %v", err)
	}
	c2 := Client(d2, persisted)
	defer c2.Close()
	// Same sandbox, not a new one: /tmp (not persistent) still has the marker.
	if b, err := c2.ReadFileMax(ctx, "/tmp/marker", 1<<20); err != nil || string(b) != "started\n" {
		t.Fatalf("marker after recover = %q, %v", b, err)
	}
	if st, err := d2.Inspect(ctx, persisted); err != nil || !st.Running {
		t.Fatalf("Inspect from new driver = %+v, %v", st, err)
	}
	if err := d2.Stop(ctx, persisted, 10*time.Second); err != nil {
		t.Fatalf("Stop from new driver: %v", err)
	}
	if err := d2.Recover(ctx, persisted); !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("Recover stopped sandbox: %v, want ErrGone", err)
	}
	d3 := s.h.NewDriver(t)
	if err := d3.Recover(ctx, persisted); !errors.Is(err, sandbox.ErrGone) {
		t.Fatalf("Recover stopped sandbox from third driver: %v, want ErrGone", err)
	}
	if err := d3.Destroy(ctx, persisted); err != nil {
		t.Fatalf("Destroy: %v", err)
	}
	if err := d3.Destroy(ctx, persisted); err != nil {
		t.Fatalf("second Destroy: %v", err)
	}
}

// testExec covers the guest protocol through a real sandbox.
func (s *suite) testExec(t *testing.T) {
	ctx := context.Background()
	d := s.h.NewDriver(t)
	_, c := start(t, d, s.spec(t, newDirs(t)))

	if out, _, code := run(t, c, "echo hello; echo $AK_TEST"); out != "hello\nconformance\n" || code != 0 {
		t.Fatalf("echo = %q (exit %d)", out, code)
	}
	for shell, want := range map[string]int{"true": 0, "false": 1, "exit 7": 7, "no-such-binary-xyz": 127} {
		if _, _, code := run(t, c, shell); code != want {
			t.Errorf("%q exit code = %d, want %d", shell, code, want)
		}
	}
	res, err := c.Exec(ctx, guest.ExecRequest{Argv: []string{"no-such-binary-xyz"}}, nil)
	if err != nil || res.ExitCode != 127 {
		t.Fatalf("argv missing binary = %+v, %v", res, err)
	}
	res, err = c.Exec(ctx, guest.ExecRequest{Shell: "sleep 100 & sleep 100", TimeoutMS: 200}, nil)
	if err != nil || !res.TimedOut {
		t.Fatalf("timeout = %+v, %v", res, err)
	}
	if out, _, _ := run(t, c, "ps -eo comm 2>/dev/null || ls /proc"); strings.Contains(out, "sleep") {
		t.Fatalf("sleep survived the timeout:\n%s", out)
	}
	p, err := c.StartProcess(ctx, guest.ExecRequest{Shell: "echo bg; exit 4"})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		info, err := c.Process(ctx, p.ID)
		if err != nil {
			t.Fatal(err)
		}
		if !info.Running {
			if *info.ExitCode != 4 {
				t.Fatalf("background exit = %d", *info.ExitCode)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("background process never exited")
		}
		time.Sleep(10 * time.Millisecond)
	}
	chunk, err := c.ProcessOutput(ctx, guest.OutputRequest{ID: p.ID})
	if err != nil || string(chunk.Data) != "bg\n" || !chunk.EOF {
		t.Fatalf("background output = %+v, %v", chunk, err)
	}
}

// roundTrip persists a handle as a store would (JSON) and reads it back.
func roundTrip(t *testing.T, h *sandbox.Handle) *sandbox.Handle {
	t.Helper()
	b, err := json.Marshal(h)
	if err != nil {
		t.Fatal(err)
	}
	var out sandbox.Handle
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return &out
}
