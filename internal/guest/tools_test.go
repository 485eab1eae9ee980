package guest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func runTool(t *testing.T, c *Client, name string, in any) *ToolResult {
	t.Helper()
	raw, _ := json.Marshal(in)
	res, err := c.RunTool(context.Background(), name, ToolRequest{Input: raw})
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return res
}

// closeShell ends the persistent shell so no goroutine outlives the test.
func closeShell(t *testing.T, c *Client) {
	t.Helper()
	runTool(t, c, "bash", map[string]any{"restart": true})
}

func TestToolsetInTheWorkspace(t *testing.T) {
	c, work := startGuest(t, nil)
	defer closeShell(t, c)

	res := runTool(t, c, "bash", map[string]any{"command": "cd sub 2>/dev/null || mkdir sub && cd sub; echo hello > note.txt; pwd"})
	if res.IsError || strings.TrimSpace(res.Content) != filepath.Join(work, "sub") {
		t.Fatalf("bash: %+v", res)
	}
	// The shell persists: cwd carried over from the previous call.
	if res := runTool(t, c, "bash", map[string]any{"command": "cat note.txt"}); strings.TrimSpace(res.Content) != "hello" {
		t.Fatalf("persistent shell: %+v", res)
	}
	if res := runTool(t, c, "read", map[string]any{"file_path": "sub/note.txt"}); res.IsError || !strings.Contains(res.Content, "hello") {
		t.Fatalf("read: %+v", res)
	}
	if res := runTool(t, c, "write", map[string]any{"file_path": "w.txt", "content": "one two"}); res.IsError {
		t.Fatalf("write: %+v", res)
	}
	if res := runTool(t, c, "edit", map[string]any{"file_path": "w.txt", "old_string": "two", "new_string": "three"}); res.IsError {
		t.Fatalf("edit: %+v", res)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "w.txt")); string(b) != "one three" {
		t.Fatalf("after edit: %q", b)
	}
	if res := runTool(t, c, "glob", map[string]any{"pattern": "**/*.txt"}); !strings.Contains(res.Content, "note.txt") || !strings.Contains(res.Content, "w.txt") {
		t.Fatalf("glob: %+v", res)
	}
	if res := runTool(t, c, "grep", map[string]any{"pattern": "thr+ee"}); !strings.Contains(res.Content, "w.txt") {
		t.Fatalf("grep: %+v", res)
	}
	// Failures are results the model sees, not transport errors.
	if res := runTool(t, c, "bash", map[string]any{"command": "sh -c 'exit 3'"}); !res.IsError || !strings.Contains(res.Content, "exit code: 3") {
		t.Fatalf("failing bash: %+v", res)
	}
	if res := runTool(t, c, "read", map[string]any{"file_path": "/etc/passwd"}); !res.IsError {
		t.Fatalf("read outside the workspace: %+v", res)
	}
	if _, err := c.RunTool(context.Background(), "web_fetch", ToolRequest{}); err == nil {
		t.Fatal("unknown tool accepted")
	}
}

func TestToolOutputLimit(t *testing.T) {
	c, _ := startGuest(t, nil)
	defer closeShell(t, c)
	raw, _ := json.Marshal(map[string]any{"command": "head -c 5000 /dev/zero | tr '\\0' x"})
	res, err := c.RunTool(context.Background(), "bash", ToolRequest{Input: raw, MaxOutputBytes: 1000})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Truncated || !strings.HasPrefix(res.Content, strings.Repeat("x", 1000)) || strings.Count(res.Content, "x") != 1000 {
		t.Fatalf("truncation: truncated=%v len=%d", res.Truncated, len(res.Content))
	}
}

// Cancelling a bash call kills its whole process group, background
// children included.
func TestToolCancelKillsProcessGroup(t *testing.T) {
	c, work := startGuest(t, nil)
	defer closeShell(t, c)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		raw, _ := json.Marshal(map[string]any{"command": "sleep 300 & echo $! > child.pid; wait"})
		_, err := c.RunTool(ctx, "bash", ToolRequest{Input: raw})
		done <- err
	}()
	pidFile := filepath.Join(work, "child.pid")
	var pid int
	for deadline := time.Now().Add(10 * time.Second); pid == 0; {
		if b, err := os.ReadFile(pidFile); err == nil {
			pid, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := syscall.Kill(pid, 0); err != nil {
		t.Fatalf("child %d not running: %v", pid, err)
	}
	cancel()
	if err := <-done; err == nil {
		t.Fatal("cancelled call returned no error")
	}
	for deadline := time.Now().Add(10 * time.Second); alive(pid); {
		if time.Now().After(deadline) {
			t.Fatalf("background child %d survived the cancel", pid)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// alive: the process exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// A call's Env (a session's credential placeholders) is the shell's
// environment from that call on; a change starts a fresh shell with it,
// and the same Env keeps the shell (and its state).
func TestToolEnvAppliesFromTheNextCall(t *testing.T) {
	c, _ := startGuest(t, nil)
	defer closeShell(t, c)
	run := func(env map[string]string, cmd string) string {
		t.Helper()
		raw, _ := json.Marshal(map[string]any{"command": cmd})
		res, err := c.RunTool(context.Background(), "bash", ToolRequest{Input: raw, Env: env})
		if err != nil || res.IsError {
			t.Fatalf("bash %q: %+v %v", cmd, res, err)
		}
		return strings.TrimSpace(res.Content)
	}
	one := map[string]string{"API_TOKEN": "placeholder-1"}
	if got := run(one, "SHELLVAR=kept; echo $API_TOKEN"); got != "placeholder-1" {
		t.Fatalf("API_TOKEN = %q, want placeholder-1", got)
	}
	if got := run(one, "echo $SHELLVAR"); got != "kept" {
		t.Fatalf("the same env restarted the shell: SHELLVAR = %q", got)
	}
	if got := run(map[string]string{"API_TOKEN": "placeholder-2"}, "echo $API_TOKEN"); got != "placeholder-2" {
		t.Fatalf("API_TOKEN after a change = %q, want placeholder-2", got)
	}
	if got := run(nil, "echo [$API_TOKEN]"); got != "[]" {
		t.Fatalf("API_TOKEN after removal = %q, want unset", got)
	}
}
