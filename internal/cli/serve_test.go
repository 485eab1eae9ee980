package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// binary is the agentkernel binary the tests run: the static build (as
// scripts/run.sh makes it), built once per test run by staticBinary.
func binary(t *testing.T) string { return staticBinary(t) }

func freePort(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// cleanEnv is the environment with every AGENTKERNEL_ variable removed, so
// the test sees embedded defaults only.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTKERNEL_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// TestServeOnEmbeddedDefaults runs the real binary with no config at all
// (only HOME pointing at an empty dir), uses it through the CLI, and stops it
// with SIGTERM.
func TestServeOnEmbeddedDefaults(t *testing.T) {
	bin := binary(t)
	home := t.TempDir()
	wd := t.TempDir()
	addr := freePort(t)
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "serve", "--listen", addr)
	cmd.Dir = wd
	// The default sandbox run dir is under TMPDIR and outlives the daemon
	// (sandboxes do): a short TMPDIR of the test's own keeps it, and
	// removes it afterwards.
	tmp, err := os.MkdirTemp("", "aks")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	cmd.Env = cleanEnv("HOME="+home, "TMPDIR="+tmp)
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()

	waitHealthy(t, "http://"+addr, &stderr)
	dataDir := filepath.Join(home, ".local", "share", "agentkernel")
	for _, p := range []string{"state.db", "admin.key", "blobs"} {
		if _, err := os.Stat(filepath.Join(dataDir, p)); err != nil {
			t.Fatalf("embedded default %s missing: %v", p, err)
		}
	}

	// The CLI finds the daemon and the admin key by itself.
	env := cleanEnv("HOME="+home, "AGENTKERNEL_URL=http://"+addr)
	out := run(t, bin, env, 0, "key", "ls", "--json")
	var keys []map[string]any
	if err := json.Unmarshal([]byte(out), &keys); err != nil || len(keys) != 1 || keys[0]["admin"] != true {
		t.Fatalf("key ls --json: %v %q", err, out)
	}
	out = run(t, bin, env, 0, "tenant", "create", "acme")
	if !strings.HasPrefix(out, "tnt_") {
		t.Fatalf("tenant create: %q", out)
	}
	out = run(t, bin, env, 0, "tenant", "ls")
	if !strings.Contains(out, "NAME") || !strings.Contains(out, "acme") {
		t.Fatalf("tenant ls table: %q", out)
	}
	run(t, bin, cleanEnv("HOME="+t.TempDir(), "AGENTKERNEL_URL=http://"+addr), 1, "key", "ls")

	// Without a key the API refuses.
	resp, err := http.Get("http://" + addr + "/v1/keys")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("no key: %d", resp.StatusCode)
	}

	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve exited with %v after SIGTERM\n%s", err, stderr.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("serve did not stop after SIGTERM\n%s", stderr.String())
	}
	if !strings.Contains(stderr.String(), "stopped") {
		t.Fatalf("no graceful shutdown in the log:\n%s", stderr.String())
	}
}

func TestServeRejectsInvalidConfig(t *testing.T) {
	bin := binary(t)
	home := t.TempDir()
	cases := []struct {
		env  []string
		args []string
		want string
	}{
		{[]string{"AGENTKERNEL_STORE_ENGINE=oracle"}, nil, "store.engine"},
		{[]string{"AGENTKERNEL_LOG_LEVEL=chatty"}, nil, "log.level"},
		{nil, []string{"--listen", "not-an-address"}, "listen"},
		{nil, []string{"--bogus"}, "bogus"},
	}
	for _, c := range cases {
		cmd := exec.Command(bin, append([]string{"serve"}, c.args...)...)
		cmd.Dir = t.TempDir()
		cmd.Env = cleanEnv(append([]string{"AGENTKERNEL_HOME=" + home}, c.env...)...)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("%v %v: serve accepted invalid config", c.env, c.args)
		}
		if !strings.Contains(string(out), c.want) {
			t.Fatalf("%v %v: output does not name %q:\n%s", c.env, c.args, c.want, out)
		}
	}
}

func TestVersion(t *testing.T) {
	out := run(t, binary(t), cleanEnv(), 0, "version")
	if !strings.HasPrefix(out, "agentkernel ") {
		t.Fatalf("version: %q", out)
	}
	run(t, binary(t), cleanEnv(), 2, "no-such-command")
}

func run(t *testing.T, bin string, env []string, wantCode int, args ...string) string {
	t.Helper()
	stdout, _ := run2(t, bin, env, wantCode, args...)
	return stdout
}

// run2 runs the binary and returns its stdout and stderr.
func run2(t *testing.T, bin string, env []string, wantCode int, args ...string) (string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != wantCode {
		t.Fatalf("agentkernel %v: exit %d, want %d\nstdout: %s\nstderr: %s", args, code, wantCode, stdout.String(), stderr.String())
	}
	return stdout.String(), stderr.String()
}

func waitHealthy(t *testing.T, url string, stderr *bytes.Buffer) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("daemon did not become healthy\n%s", stderr.String())
}
