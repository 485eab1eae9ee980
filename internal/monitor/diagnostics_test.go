package monitor_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/monitor"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/wsnap"
)

// failedWorkflow makes a ticket whose one agent task failed (as the idle
// monitor leaves it) and returns the ticket id.
func failedWorkflow(t *testing.T, e *env, status store.TaskStatus) string {
	t.Helper()
	ctx := context.Background()
	tk, err := e.st.CreateTicket(ctx, &store.Ticket{TenantID: "ten_test", Title: "write hello.py"})
	if err != nil {
		t.Fatal(err)
	}
	task, err := e.st.CreateTask(ctx, &store.Task{TenantID: "ten_test", TicketID: tk.ID, Command: json.RawMessage(`["true"]`)})
	if err != nil {
		t.Fatal(err)
	}
	reason := "idle_timeout"
	tr, err := e.st.TransitionTask(ctx, store.TransitionTaskParams{ID: task.ID, From: []store.TaskStatus{store.TaskPending}, To: status,
		Patch: store.TaskPatch{FailureReason: &reason}, At: e.clock.Now()})
	if err != nil || !tr.OK {
		t.Fatalf("transition: %v %+v", err, tr)
	}
	return tk.ID
}

func diagnosticTasks(t *testing.T, e *env, ticket string) []*store.Task {
	t.Helper()
	ts, err := e.st.ListTasks(context.Background(), store.ListTasksParams{TicketID: ticket, Kind: store.TaskDiagnostic})
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// sweepAll sweeps on every service at once (several nodes) and returns
// how many diagnostics were spawned in total.
func sweepAll(services ...*monitor.Service) int {
	var mu sync.Mutex
	var wg sync.WaitGroup
	n := 0
	for _, s := range services {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rep := s.SweepDiagnostics(context.Background())
			mu.Lock()
			n += len(rep.Spawned)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return n
}

// finishDiagnostics runs checks until every diagnostic task of the ticket
// has ended.
func finishDiagnostics(t *testing.T, e *env, s *monitor.Service, ticket string) {
	t.Helper()
	waitFor(t, "diagnostics to finish", func() bool {
		s.CheckOnce(context.Background())
		for _, d := range diagnosticTasks(t, e, ticket) {
			if !d.Status.Terminal() {
				return false
			}
		}
		return true
	})
}

// The seed's runaway loop: an original task failed, a diagnostic runs and
// completes, the original is still failed. Before the fix another
// diagnostic was spawned on every sweep, and with an in-memory cooldown a
// restart or a second worker spawned duplicates. Here: two nodes sweeping
// at once spawn one; after it completes the workflow goes to human review
// and no restart or amount of time spawns another.
func TestDiagnosticsNeverLoopAcrossRestartsAndNodes(t *testing.T) {
	e := newEnv(t)
	// The diagnostic agent succeeds only if its context bundle names the
	// original failure.
	diag := func(c *monitor.Config) {
		c.Diagnostics.Command = []string{"/bin/sh", "-c", `grep -q '"failure_reason": "idle_timeout"' "$AGENTKERNEL_DIAGNOSTIC_CONTEXT" || grep -q '"FailureReason": "idle_timeout"' "$AGENTKERNEL_DIAGNOSTIC_CONTEXT"`}
	}
	a, b := e.service(diag), e.service(diag)
	ticket := failedWorkflow(t, e, store.TaskFailed)
	okTicket := failedWorkflow(t, e, store.TaskCompleted)

	// Not stuck until 60 s after the last task ended.
	if n := sweepAll(a, b); n != 0 {
		t.Fatalf("spawned %d diagnostics before the stuck threshold", n)
	}
	e.clock.Advance(61 * time.Second)
	if n := sweepAll(a, b, a, b); n != 1 {
		t.Fatalf("four concurrent sweeps on two nodes spawned %d diagnostics, want 1", n)
	}
	finishDiagnostics(t, e, a, ticket)
	ds := diagnosticTasks(t, e, ticket)
	if len(ds) != 1 || ds[0].Status != store.TaskCompleted {
		t.Fatalf("diagnostic %+v: want one completed (its bundle names the failure)", *ds[0])
	}

	// A restart: node a goes away, a fresh node c comes up on the same store.
	a.Stop()
	c := e.service(diag)
	for range 10 {
		e.clock.Advance(10 * time.Minute)
		if n := sweepAll(b, c); n != 0 {
			t.Fatalf("spawned %d more diagnostics after one completed with the original still failed", n)
		}
	}
	rep := c.SweepDiagnostics(context.Background())
	verdicts := map[string]string{}
	for _, v := range rep.Verdicts {
		verdicts[v.TicketID] = v.Verdict
	}
	if verdicts[ticket] != monitor.SkipHumanReview || verdicts[okTicket] != monitor.SkipAllCompleted {
		t.Fatalf("verdicts %v", verdicts)
	}
	st, err := e.st.GetDiagnosticState(context.Background(), ticket)
	if err != nil || !st.HumanReview || st.Attempts != 1 || st.Completed != 1 || st.PendingTaskID != "" {
		t.Fatalf("diagnostic state %+v %v", st, err)
	}
	if n := len(diagnosticTasks(t, e, okTicket)); n != 0 {
		t.Fatalf("a workflow whose tasks all completed got %d diagnostics", n)
	}
}

// Failing diagnostics stop at the consecutive-failure cap, and the cooldown
// holds across nodes.
func TestDiagnosticsStopAtConsecutiveFailuresAndHonourCooldown(t *testing.T) {
	e := newEnv(t)
	diag := func(c *monitor.Config) {
		c.Diagnostics.Command = []string{"/bin/sh", "-c", "exit 1"}
		c.Diagnostics.Rules = store.DiagnosticRules{MaxPerWorkflow: 3, MaxConsecutiveFailures: 2, Cooldown: 5 * time.Minute}
	}
	a, b := e.service(diag), e.service(diag)
	ticket := failedWorkflow(t, e, store.TaskFailed)
	e.clock.Advance(61 * time.Second)
	if n := sweepAll(a, b); n != 1 {
		t.Fatalf("spawned %d, want 1", n)
	}
	finishDiagnostics(t, e, a, ticket)
	// Stuck again, but within the cooldown: refused on every node.
	e.clock.Advance(2 * time.Minute)
	rep := b.SweepDiagnostics(context.Background())
	if len(rep.Spawned) != 0 || rep.Refused[ticket] != store.RefusedCooldown {
		t.Fatalf("within cooldown: spawned %d, refused %q", len(rep.Spawned), rep.Refused[ticket])
	}
	for range 6 {
		e.clock.Advance(6 * time.Minute)
		sweepAll(a, b)
		finishDiagnostics(t, e, b, ticket)
	}
	ds := diagnosticTasks(t, e, ticket)
	if len(ds) != 2 {
		t.Fatalf("%d diagnostics, want 2 (max_consecutive_failures)", len(ds))
	}
	rep = a.SweepDiagnostics(context.Background())
	if rep.Refused[ticket] != store.RefusedConsecutiveFailures {
		t.Fatalf("refusal %q, want consecutive_failures", rep.Refused[ticket])
	}
}

// Seed 001's clone_ready safeguard: a diagnostic works on a clone of the
// workspace its workflow's agent left, so it is not spawned while that
// sandbox is still live (the agent exited, the monitor has not stopped it
// yet): the clone would be of a workspace still changing. Once the
// termination stopped it, the diagnostic starts with exactly those files,
// and what it writes stays in its own sandbox.
func TestDiagnosticWaitsForAStoppedWorkspaceAndWorksOnItsClone(t *testing.T) {
	e := newEnv(t)
	ws := wsnap.Sandboxes{Locker: e.mgr, Snaps: wsnap.New(e.blobs, slog.New(slog.DiscardHandler))}
	s := e.service(func(c *monitor.Config) {
		c.Workspaces = ws
		c.Diagnostics.Command = []string{"/bin/sh", "-c", `grep -qx 'half done' /workspace/notes.txt && echo diagnosed > /workspace/diag.txt`}
	})
	ctx := context.Background()
	tk, err := e.st.CreateTicket(ctx, &store.Ticket{TenantID: "ten_test", Title: "write notes"})
	if err != nil {
		t.Fatal(err)
	}
	task := e.runAgent(s, script("agentkernel-agent heartbeat running", "echo 'half done' > /workspace/notes.txt", "exit 4"),
		func(p *monitor.CreateTaskParams) { p.TicketID = tk.ID })
	waitFor(t, "the agent's exit", func() bool {
		s.CheckOnce(ctx)
		got, _ := e.st.GetTask(ctx, task.ID)
		return got.Status == store.TaskFailed
	})

	// Stuck (60 s after the failure), but the sandbox is not stopped yet.
	e.clock.Advance(61 * time.Second)
	rep := s.SweepDiagnostics(ctx)
	if len(rep.Spawned) != 0 || rep.Refused[tk.ID] != store.RefusedCloneNotReady {
		t.Fatalf("with the workflow's sandbox still live: spawned %d, refused %q; want clone_not_ready", len(rep.Spawned), rep.Refused[tk.ID])
	}

	// Dead after 90 s without a heartbeat: terminated, transcript saved,
	// stopped. Now the clone is ready.
	e.clock.Advance(30 * time.Second)
	if term := check(t, s, task.SandboxID); term == nil {
		t.Fatal("the dead agent's sandbox was not terminated")
	}
	rep = s.SweepDiagnostics(ctx)
	if len(rep.Spawned) != 1 {
		t.Fatalf("after the stop: spawned %d, refused %q", len(rep.Spawned), rep.Refused[tk.ID])
	}
	finishDiagnostics(t, e, s, tk.ID)
	d := diagnosticTasks(t, e, tk.ID)[0]
	if d.Status != store.TaskCompleted {
		t.Fatalf("diagnostic %s %q: it did not find the agent's notes in its workspace", d.Status, d.FailureReason)
	}
	if !strings.Contains(string(d.SandboxSpec), task.SandboxID) || d.SandboxID == task.SandboxID {
		t.Fatalf("diagnostic ran in %s with spec %s; want its own sandbox, cloned from %s", d.SandboxID, d.SandboxSpec, task.SandboxID)
	}
	err = e.mgr.WithWorkspace(ctx, "ten_test", task.SandboxID, func(dir string) error {
		if _, err := os.Stat(filepath.Join(dir, "diag.txt")); !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("the diagnostic's write reached the original workspace: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
