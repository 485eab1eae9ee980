package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSecondServeOnTheSameHome: a second daemon on a home that one already
// serves exits at once with an error naming the holder's pid and the home,
// before it opens the store or recovers anything: the first daemon's
// sandbox keeps its state and its running processes.
func TestSecondServeOnTheSameHome(t *testing.T) {
	bin := binary(t)
	home := t.TempDir()
	s := startServer(t, bin, home, freePort(t))
	defer s.stop(t)
	env := s.env()
	id := strings.TrimSpace(run(t, bin, env, 0, "sandbox", "create"))
	defer run(t, bin, env, 0, "sandbox", "rm", id)
	// A process in its own session outlives the exec that started it; its
	// pid is written once it is there, and the exec waits for that.
	run(t, bin, env, 0, "sandbox", "exec", id, "--", "sh", "-c",
		`setsid sh -c 'echo $$ > /tmp/bg.pid.new && mv /tmp/bg.pid.new /tmp/bg.pid && exec sleep 600' >/dev/null 2>&1 < /dev/null &
		until [ -s /tmp/bg.pid ]; do :; done`)
	before := run(t, bin, env, 0, "sandbox", "get", id, "--json")

	// The timeout is a safety net: a second daemon that serves fails the
	// test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	second := exec.CommandContext(ctx, bin, "serve", "--listen", freePort(t), "--home", home)
	second.Dir = t.TempDir()
	second.Env = s.cmd.Env
	var stderr bytes.Buffer
	second.Stdout, second.Stderr = &stderr, &stderr
	err := second.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("second serve on the same home: %v (want exit 1)\n%s", err, stderr.String())
	}
	msg := stderr.String()
	if !strings.Contains(msg, "pid "+strconv.Itoa(s.cmd.Process.Pid)) || !strings.Contains(msg, home) {
		t.Fatalf("the error does not name the holder's pid %d and the home: %q", s.cmd.Process.Pid, msg)
	}
	if strings.Contains(msg, "recovered") || strings.Contains(msg, "serving") {
		t.Fatalf("the second daemon got as far as recovery or serving:\n%s", msg)
	}

	// The first daemon's sandbox is as it was, its background process alive.
	after := run(t, bin, env, 0, "sandbox", "get", id, "--json")
	if keep(t, before) != keep(t, after) {
		t.Fatalf("the sandbox changed:\nbefore %s\nafter  %s", before, after)
	}
	run(t, bin, env, 0, "sandbox", "exec", id, "--", "sh", "-c", "kill -0 $(cat /tmp/bg.pid)")

	// The lock file names the holder.
	if b, err := os.ReadFile(filepath.Join(home, "daemon.lock")); err != nil || strings.TrimSpace(string(b)) != strconv.Itoa(s.cmd.Process.Pid) {
		t.Fatalf("daemon.lock holds %q (%v), want the daemon's pid %d", b, err, s.cmd.Process.Pid)
	}
}

// keep is the part of a sandbox that recovery would change: its state,
// generation, start time and runtime.
func keep(t *testing.T, js string) string {
	t.Helper()
	var sb struct {
		State      string          `json:"state"`
		Generation int64           `json:"generation"`
		StartedAt  string          `json:"started_at"`
		UpdatedAt  string          `json:"updated_at"`
		Runtime    json.RawMessage `json:"runtime"`
	}
	if err := json.Unmarshal([]byte(js), &sb); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(sb)
	return string(b)
}
