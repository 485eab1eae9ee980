package monitor_test

import (
	"context"
	"encoding/json"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/monitor"
	"github.com/agentkernel/agentkernel/internal/store"
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
