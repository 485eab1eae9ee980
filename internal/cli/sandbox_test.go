package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

var (
	staticOnce sync.Once
	staticBin  string
	staticErr  error
)

// staticBinary builds cmd/agentkernel with CGO off (so it can be injected as
// the guest) and the failpoints tag (crash tests hang it on purpose).
func staticBinary(t *testing.T) string {
	t.Helper()
	staticOnce.Do(func() {
		dir, err := testenv.ProcessTempDir("agentkernel-static")
		if err != nil {
			staticErr = err
			return
		}
		staticBin = filepath.Join(dir, "agentkernel")
		cmd := exec.Command("go", "build", "-tags", "failpoints", "-o", staticBin, "github.com/agentkernel/agentkernel/cmd/agentkernel")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			staticErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if staticErr != nil {
		t.Fatal(staticErr)
	}
	return staticBin
}

type server struct {
	cmd    *exec.Cmd
	addr   string
	home   string
	stderr *bytes.Buffer
}

// homes are the homes servers ran on in this test binary: the sandbox run
// dir every server of a home shares (a restarted daemon reattaches to its
// sandboxes through the sockets there) and every server started on it.
var (
	homesMu sync.Mutex
	homes   = map[string]*homeServers{}
)

type homeServers struct {
	run     string
	servers []*server
}

// startServer runs `agentkernel serve` on home (extraEnv is added to its
// environment). The first server of a home registers the cleanup that
// leaves no sandbox behind: sandboxes outlive their daemon by design, a
// SIGKILLed one too, so after the test a daemon is started again on the
// home, destroys every sandbox and stops.
func startServer(t *testing.T, bin, home, addr string, extraEnv ...string) *server {
	t.Helper()
	homesMu.Lock()
	h := homes[home]
	if h == nil {
		run, err := os.MkdirTemp("", "akc")
		if err != nil {
			homesMu.Unlock()
			t.Fatal(err)
		}
		h = &homeServers{run: filepath.Join(run, "r")}
		homes[home] = h
		t.Cleanup(func() {
			cleanHome(t, bin, home)
			os.RemoveAll(run)
		})
	}
	homesMu.Unlock()
	s := spawnServer(t, bin, home, addr, h.run, extraEnv...)
	homesMu.Lock()
	h.servers = append(h.servers, s)
	homesMu.Unlock()
	return s
}

func spawnServer(t *testing.T, bin, home, addr, run string, extraEnv ...string) *server {
	t.Helper()
	s := &server{addr: addr, home: home, stderr: &bytes.Buffer{}}
	s.cmd = exec.Command(bin, "serve", "--listen", addr, "--home", home)
	s.cmd.Dir = home
	s.cmd.Env = cleanEnv(append([]string{"HOME=" + home, "AGENTKERNEL_SANDBOX_RUN_DIR=" + run}, extraEnv...)...)
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitHealthy(t, "http://"+addr, s.stderr)
	return s
}

// cleanHome ends every server the test left running on home, then runs
// one more to destroy the sandboxes they left.
func cleanHome(t *testing.T, bin, home string) {
	homesMu.Lock()
	h := homes[home]
	delete(homes, home)
	homesMu.Unlock()
	for _, s := range h.servers {
		if s.cmd.ProcessState == nil { // never waited for: still running
			_ = s.cmd.Process.Kill()
			_ = s.cmd.Wait()
		}
	}
	s := spawnServer(t, bin, home, freePort(t), h.run)
	defer s.stop(t)
	key, err := os.ReadFile(filepath.Join(home, "admin.key"))
	if err != nil {
		t.Error(err)
		return
	}
	testenv.DestroySandboxes(t, "http://"+s.addr, strings.TrimSpace(string(key)))
}

func (s *server) env() []string {
	return cleanEnv("AGENTKERNEL_HOME="+s.home, "AGENTKERNEL_URL=http://"+s.addr)
}

func (s *server) stop(t *testing.T) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	_ = s.cmd.Wait()
}

// kill SIGKILLs the server: nothing of it runs any cleanup.
func (s *server) kill(t *testing.T) {
	t.Helper()
	if err := s.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = s.cmd.Wait()
}

// TestCLISandboxRoundTrip: create → exec → stop → start → exec through the
// CLI, with the workspace intact and exec's exit code passed through.
func TestCLISandboxRoundTrip(t *testing.T) {
	bin := staticBinary(t)
	home := t.TempDir()
	s := startServer(t, bin, home, freePort(t))
	defer s.stop(t)
	env := s.env()

	id := strings.TrimSpace(run(t, bin, env, 0, "sandbox", "create"))
	if !strings.HasPrefix(id, "sbx_") {
		t.Fatalf("create printed %q", id)
	}
	defer run(t, bin, env, 0, "sandbox", "rm", id)
	run(t, bin, env, 0, "sandbox", "exec", id, "--", "sh", "-c", "echo persisted > /workspace/note")
	if out := run(t, bin, env, 0, "sandbox", "ls"); !strings.Contains(out, id) || !strings.Contains(out, "active") {
		t.Fatalf("ls: %q", out)
	}
	run(t, bin, env, 0, "sandbox", "stop", id)
	if out := run(t, bin, env, 0, "sandbox", "ls", "--state", "cold"); !strings.Contains(out, id) {
		t.Fatalf("not cold after stop: %q", out)
	}
	run(t, bin, env, 0, "sandbox", "start", id)
	if out := run(t, bin, env, 0, "sandbox", "exec", id, "--", "cat", "/workspace/note"); out != "persisted\n" {
		t.Fatalf("workspace after stop/start: %q", out)
	}
	// exec exits with the command's exit code.
	run(t, bin, env, 7, "sandbox", "exec", id, "--", "sh", "-c", "exit 7")
	// cp both ways.
	local := filepath.Join(t.TempDir(), "in.txt")
	os.WriteFile(local, []byte("copied"), 0o644)
	run(t, bin, env, 0, "sandbox", "cp", local, id+":sub/in.txt")
	if out := run(t, bin, env, 0, "sandbox", "cp", id+":sub/in.txt", "-"); out != "copied" {
		t.Fatalf("cp back: %q", out)
	}
	var backups []map[string]any
	if err := json.Unmarshal([]byte(run(t, bin, env, 0, "sandbox", "backups", id, "--json")), &backups); err != nil || len(backups) != 1 {
		t.Fatalf("backups: %v %v", backups, err)
	}
}

// TestSIGKILLDuringSnapshot: the daemon dies while a hibernation's snapshot
// is written but not yet verified. After a restart the sandbox was not
// stopped (it is reattached, same instance, workspace as it was), and the
// previous backup is intact and still verifies.
func TestSIGKILLDuringSnapshot(t *testing.T) {
	bin := staticBinary(t)
	home := t.TempDir()
	addr := freePort(t)
	s := startServer(t, bin, home, addr)
	env := s.env()
	id := strings.TrimSpace(run(t, bin, env, 0, "sandbox", "create"))
	run(t, bin, env, 0, "sandbox", "exec", id, "--", "sh", "-c", "echo v1 > /workspace/v")
	run(t, bin, env, 0, "sandbox", "stop", id) // backup 1, verified
	run(t, bin, env, 0, "sandbox", "exec", id, "--", "sh", "-c", "echo v2 > /workspace/v; echo instance > /tmp/instance")

	flag := filepath.Join(home, "failpoint-snapshot-hang")
	os.WriteFile(flag, nil, 0o600)
	stopDone := make(chan struct{})
	go func() {
		defer close(stopDone)
		cmd := exec.Command(bin, "sandbox", "stop", id)
		cmd.Env = env
		_ = cmd.Run() // fails when the daemon dies
	}()
	waitFile(t, flag+".reached", s)
	s.kill(t) // SIGKILL mid-snapshot
	<-stopDone
	os.Remove(flag)

	s2 := startServer(t, bin, home, addr)
	defer s2.stop(t)
	defer run(t, bin, env, 0, "sandbox", "rm", id)
	var sb map[string]any
	if err := json.Unmarshal([]byte(run(t, bin, env, 0, "sandbox", "get", id, "--json")), &sb); err != nil {
		t.Fatal(err)
	}
	if sb["state"] != "active" {
		t.Fatalf("after the crash the sandbox is %v; it must still be the running instance", sb["state"])
	}
	if out := run(t, bin, env, 0, "sandbox", "exec", id, "--", "cat", "/tmp/instance", "/workspace/v"); out != "instance\nv2\n" {
		t.Fatalf("the sandbox was stopped or its workspace changed: %q", out)
	}
	var backups []struct {
		ID     string `json:"id"`
		SHA256 string `json:"sha256"`
		Size   int64  `json:"size"`
	}
	if err := json.Unmarshal([]byte(run(t, bin, env, 0, "sandbox", "backups", id, "--json")), &backups); err != nil {
		t.Fatal(err)
	}
	if len(backups) != 1 {
		t.Fatalf("want exactly the one verified backup, got %d", len(backups))
	}
	// The previous backup's blob still reads back and verifies.
	blobs, err := fsblob.Open(context.Background(), filepath.Join(home, "blobs"), fsblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	verified := false
	for info, err := range blobs.List(context.Background(), "backups/") {
		if err != nil {
			t.Fatal(err)
		}
		if info.SHA256 != backups[0].SHA256 {
			continue
		}
		r, _, err := blobs.Get(context.Background(), info.Key)
		if err != nil {
			t.Fatal(err)
		}
		n, err := io.Copy(io.Discard, r)
		r.Close()
		if err != nil || n != backups[0].Size {
			t.Fatalf("previous backup does not verify: %d bytes, %v", n, err)
		}
		verified = true
	}
	if !verified {
		t.Fatal("previous backup's blob is missing")
	}
	// And hibernation works again after the crash.
	run(t, bin, env, 0, "sandbox", "stop", id)
	run(t, bin, env, 0, "sandbox", "start", id)
	if out := run(t, bin, env, 0, "sandbox", "exec", id, "--", "cat", "/workspace/v"); out != "v2\n" {
		t.Fatalf("after a clean stop/start: %q", out)
	}
}
