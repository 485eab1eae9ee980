package crashtest

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// longTool starts, marks that it runs (a file the test sees on the host),
// runs for a few seconds more, then appends "done" once.
const longTool = "touch /workspace/started; sleep 4; echo done >> /workspace/out; cat /workspace/out"

func longToolModel(r anthropictest.Request) anthropictest.Turn {
	if hasToolResult(r) {
		return anthropictest.Turn{Text: "Finished."}
	}
	return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": longTool}}}}
}

// waitToolStarted waits until the long tool runs in the session's sandbox
// and returns the sandbox's directory on the host.
func waitToolStarted(t *testing.T, n *node) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		m, _ := filepath.Glob(filepath.Join(n.home, "sandboxes", "*", "workspace", "started"))
		if len(m) == 1 {
			return filepath.Dir(filepath.Dir(m[0]))
		}
		if time.Now().After(deadline) {
			t.Fatalf("the tool never started\n%s", n.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestKillWhileAToolRuns: the daemon dies while a tool call runs in the
// sandbox (the guest accepted it and the command is mid-way). The sandbox
// outlives the daemon; the recovered turn reattaches to the running call
// through the guest's own record of it, gets its result, and the command
// ran exactly once.
func TestKillWhileAToolRuns(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		fake := anthropictest.New(t, longToolModel)
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newSession(t, c)
		send(t, c, sid, "go")
		sbx := waitToolStarted(t, n)
		n.kill()
		if _, err := os.Stat(filepath.Join(sbx, "workspace", "out")); err == nil {
			t.Fatal("the command finished before the kill: the test did not kill mid-call")
		}
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		checkTrajectory(t, evs)
		results := ofType(evs, "agent.tool_result")
		if len(results) != 1 || strings.TrimSpace(results[0].text()) != "done" {
			t.Fatalf("tool results %v: want the one call's output, \"done\" once", results)
		}
		if len(ofType(evs, "session.status_rescheduled")) != 1 {
			t.Fatalf("trajectory %v", types(evs))
		}
		if b, _ := os.ReadFile(filepath.Join(sbx, "workspace", "out")); strings.Count(string(b), "done") != 1 {
			t.Fatalf("the command ran %d times", strings.Count(string(b), "done"))
		}
	})
}

// TestKillWhileAToolRunsAndTheGuestDies: as above, but the sandbox dies too
// before the daemon is back: the call was accepted, its guest is gone and
// no result was recorded. Whether it had its effect is unknown, so the
// agent is told so — it is never silently run again.
func TestKillWhileAToolRunsAndTheGuestDies(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		fake := anthropictest.New(t, longToolModel)
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newSession(t, c)
		send(t, c, sid, "go")
		sbx := waitToolStarted(t, n)
		n.kill()
		killSandbox(t, filepath.Base(sbx))
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		checkTrajectory(t, evs)
		results := ofType(evs, "agent.tool_result")
		if len(results) != 1 || !strings.Contains(results[0].text(), "may have executed; verify before retrying") ||
			!strings.Contains(results[0].Raw, `"is_error":true`) {
			t.Fatalf("tool results %v: want the call reported as may-have-executed\n%s", results, n.logs())
		}
		if b, err := os.ReadFile(filepath.Join(sbx, "workspace", "out")); err == nil && strings.Contains(string(b), "done") {
			t.Fatalf("the command was run again after its guest died: out = %q", b)
		}
	})
}

// killSandbox SIGKILLs sandbox id: its bwrap and every process below it
// (the guest, PID 1 of the sandbox's PID namespace, and the command).
func killSandbox(t *testing.T, id string) {
	t.Helper()
	parent := map[int]int{}
	var roots []int
	dirs, _ := filepath.Glob("/proc/[0-9]*")
	for _, d := range dirs {
		pid, err := strconv.Atoi(filepath.Base(d))
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid …: comm may hold spaces; parse after ")".
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 {
			parent[pid], _ = strconv.Atoi(fields[1])
		}
		cmd, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err == nil && strings.HasPrefix(filepath.Base(strings.SplitN(string(cmd), "\x00", 2)[0]), "bwrap") &&
			strings.Contains(string(cmd), "/"+id+"/workspace") {
			roots = append(roots, pid)
		}
	}
	if len(roots) == 0 {
		t.Fatalf("no bwrap of sandbox %s", id)
	}
	doomed := map[int]bool{}
	for _, r := range roots {
		doomed[r] = true
	}
	for grew := true; grew; {
		grew = false
		for pid, pp := range parent {
			if !doomed[pid] && doomed[pp] {
				doomed[pid], grew = true, true
			}
		}
	}
	// Stop them all before killing any: a shell whose sleep is killed
	// first would run the rest of its command line ("echo done") before
	// its own SIGKILL lands; a stopped one runs nothing.
	for pid := range doomed {
		_ = syscall.Kill(pid, syscall.SIGSTOP)
	}
	for pid := range doomed {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	deadline := time.Now().Add(10 * time.Second)
	for pid := range doomed {
		for syscall.Kill(pid, 0) == nil {
			if time.Now().After(deadline) {
				t.Fatalf("process %d of sandbox %s still runs after SIGKILL", pid, id)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}
