package monitor_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/monitor"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// check runs one check and returns the termination of sbx, if any.
func check(t *testing.T, s *monitor.Service, sbx string) *monitor.Termination {
	t.Helper()
	rep := s.CheckOnce(context.Background())
	if rep.Err != nil {
		t.Fatal(rep.Err)
	}
	for i := range rep.Terminated {
		if rep.Terminated[i].SandboxID == sbx {
			return &rep.Terminated[i]
		}
	}
	return nil
}

func decide(t *testing.T, e *env, s *monitor.Service, task *store.Task) monitor.Decision {
	t.Helper()
	a, err := e.st.GetActivity(context.Background(), task.SandboxID)
	if err != nil {
		t.Fatal(err)
	}
	return monitor.Decide(a, *task.StartedAt, e.clock.Now(), s.Thresholds())
}

// Problem 1: an agent completes, is resumed, works, then only heart-beats:
// the resume resets the completion and the sandbox is reaped as idle.
func TestProblem1ResumeAfterCompletionIsReapedWhenIdle(t *testing.T) {
	e := newEnv(t)
	s := e.service(nil)
	task := e.runAgent(s, script(
		"agentkernel-agent event agent.started",
		"agentkernel-agent heartbeat running",
		"agentkernel-agent event agent.tool_use --data '{\"tool\":\"bash\"}'",
		"echo 'first piece of work done'",
		"agentkernel-agent event agent.completed",
		heartbeatLoop("idle"),
		"while [ ! -f /workspace/resume ]; do sleep 0.1; done",
		"echo 'resumed for more work'",
		"agentkernel-agent event agent.file_edited --data '{\"path\":\"main.go\"}'",
		"wait",
	), nil)
	e.activity(task.SandboxID, func(a *store.AgentActivity) bool { return a.LatestCompletedAt != nil })
	e.advance(task.SandboxID, 4*time.Minute, 45*time.Second)
	if d := decide(t, e, s, task); d.State != monitor.StateCompleted || d.Terminate {
		t.Fatalf("after completion: %s terminate=%v (%s)", d.State, d.Terminate, d.Why)
	}
	if term := check(t, s, task.SandboxID); term != nil {
		t.Fatalf("completed sandbox terminated: %+v", term)
	}
	if err := e.mgr.WriteFile(context.Background(), "", task.SandboxID, "/workspace/resume", []byte("go"), 0o644); err != nil {
		t.Fatal(err)
	}
	e.activity(task.SandboxID, func(a *store.AgentActivity) bool { return a.LastWorkEventSeq > a.LatestCompletedSeq })
	if d := decide(t, e, s, task); d.State != monitor.StateResumed {
		t.Fatalf("after resume: %s (%s)", d.State, d.Why)
	}
	// Before the fix the sandbox sat forever: now it goes idle after 3 min.
	e.advance(task.SandboxID, 3*time.Minute, 45*time.Second)
	if term := check(t, s, task.SandboxID); term != nil {
		t.Fatalf("reaped at exactly the idle threshold: %+v", term.Decision)
	}
	e.advance(task.SandboxID, 2*time.Second, time.Second)
	term := check(t, s, task.SandboxID)
	if term == nil || term.Decision.Reason != store.TerminationIdle || term.Decision.HasCompleted {
		t.Fatalf("resumed-then-idle sandbox not reaped as idle: %+v", term)
	}
	got := e.waitTask(task.ID, func(t *store.Task) bool { return t.Status.Terminal() })
	if got.Status != store.TaskFailed || got.FailureReason != "idle_timeout" {
		t.Fatalf("task %s %q, want failed idle_timeout", got.Status, got.FailureReason)
	}
	tr, err := e.st.LatestTranscript(context.Background(), store.LatestTranscriptParams{TaskID: task.ID})
	if err != nil || !strings.Contains(string(tr.Content), "resumed for more work") {
		t.Fatalf("transcript %v: %q", err, contentOf(tr))
	}
	assertStopped(t, e, task.SandboxID)
	assertAudit(t, e, task, store.TerminationIdle, tr.ID)
}

// Problem 2: heartbeats keep saying "running" but no work comes: stuck
// after 10 minutes, not before.
func TestProblem2RunningButStuckIsReaped(t *testing.T) {
	e := newEnv(t)
	s := e.service(nil)
	task := e.runAgent(s, script(
		"agentkernel-agent event agent.started",
		"agentkernel-agent event agent.tool_use",
		heartbeatLoop("running"),
		"echo 'stuck in a loop'",
		"wait",
	), nil)
	e.activity(task.SandboxID, func(a *store.AgentActivity) bool {
		return a.LastWorkEventAt != nil && a.LastHeartbeatStatus == store.HeartbeatRunning
	})
	for range 10 {
		e.advance(task.SandboxID, time.Minute, 45*time.Second)
		if term := check(t, s, task.SandboxID); term != nil {
			t.Fatalf("running agent reaped at %s without work: %+v", e.clock.Now(), term.Decision)
		}
	}
	e.advance(task.SandboxID, 2*time.Second, time.Second)
	term := check(t, s, task.SandboxID)
	if term == nil || term.Decision.Reason != store.TerminationStuckRunning || !term.Decision.IsStuckRunning {
		t.Fatalf("stuck agent not reaped as stuck_running: %+v", term)
	}
	got := e.waitTask(task.ID, func(t *store.Task) bool { return t.Status.Terminal() })
	if got.Status != store.TaskFailed || got.FailureReason != "stuck_running" {
		t.Fatalf("task %s %q, want failed stuck_running", got.Status, got.FailureReason)
	}
	assertStopped(t, e, task.SandboxID)
}

// Problem 3: a completed agent that idles is not "idle": it is cleaned up
// after the post-completion timeout and its task stays completed.
func TestProblem3CompletedIsNotFailed(t *testing.T) {
	e := newEnv(t)
	s := e.service(nil)
	task := e.runAgent(s, script(
		"agentkernel-agent event agent.started",
		"agentkernel-agent event agent.file_edited",
		"echo 'wrote hello.py'",
		"agentkernel-agent event agent.completed --data '{\"summary\":\"done\"}'",
		heartbeatLoop("idle"),
		"wait",
	), nil)
	e.activity(task.SandboxID, func(a *store.AgentActivity) bool { return a.LatestCompletedAt != nil && a.LastHeartbeatAt != nil })
	// Past the idle threshold (3 min) but within post-completion (5 min).
	e.advance(task.SandboxID, 4*time.Minute, 45*time.Second)
	if term := check(t, s, task.SandboxID); term != nil {
		t.Fatalf("completed agent reaped as %s after 4m", term.Decision.Reason)
	}
	e.advance(task.SandboxID, time.Minute, 45*time.Second)
	term := check(t, s, task.SandboxID)
	if term == nil || term.Decision.Reason != store.TerminationPostCompletion || !term.Decision.HasCompleted {
		t.Fatalf("completed agent not cleaned up after 5m: %+v", term)
	}
	got := e.waitTask(task.ID, func(t *store.Task) bool { return t.Status.Terminal() })
	if got.Status != store.TaskCompleted || got.FailureReason != "" {
		t.Fatalf("completed agent's task is %s %q, want completed", got.Status, got.FailureReason)
	}
	tr, err := e.st.LatestTranscript(context.Background(), store.LatestTranscriptParams{TaskID: task.ID})
	if err != nil || !strings.Contains(string(tr.Content), "wrote hello.py") {
		t.Fatalf("transcript %v: %q", err, contentOf(tr))
	}
	assertStopped(t, e, task.SandboxID)
}

// An agent that reports completion and then exits non-zero completed its
// task; one that exits non-zero without it failed; a dead agent is reaped
// as heartbeat_timeout, and a second check never terminates twice.
func TestExitAndDeadAgents(t *testing.T) {
	e := newEnv(t)
	s := e.service(nil)
	done := e.runAgent(s, script("agentkernel-agent heartbeat running", "agentkernel-agent event agent.completed", "exit 3"), nil)
	crashed := e.runAgent(s, script("agentkernel-agent heartbeat running", "agentkernel-agent event agent.tool_use", "exit 4"), nil)
	for _, id := range []string{done.ID, crashed.ID} {
		waitFor(t, "exit of "+id, func() bool {
			s.CheckOnce(context.Background())
			tk, _ := e.st.GetTask(context.Background(), id)
			return tk.Status.Terminal()
		})
	}
	if tk, _ := e.st.GetTask(context.Background(), done.ID); tk.Status != store.TaskCompleted {
		t.Fatalf("agent.completed then exit 3: %s %q", tk.Status, tk.FailureReason)
	}
	if tk, _ := e.st.GetTask(context.Background(), crashed.ID); tk.Status != store.TaskFailed || tk.FailureReason != "exit_code_4" {
		t.Fatalf("exit 4: %s %q", tk.Status, tk.FailureReason)
	}
	// Both stop heart-beating: DEAD after 90 s, reaped once; the completed
	// task stays completed.
	e.clock.Advance(91 * time.Second)
	rep := s.CheckOnce(context.Background())
	if len(rep.Terminated) != 2 {
		t.Fatalf("terminated %d sandboxes, want 2: %+v", len(rep.Terminated), rep)
	}
	for _, term := range rep.Terminated {
		if term.Decision.Reason != store.TerminationHeartbeat {
			t.Fatalf("reason %s, want heartbeat_timeout", term.Decision.Reason)
		}
	}
	if tk, _ := e.st.GetTask(context.Background(), done.ID); tk.Status != store.TaskCompleted {
		t.Fatalf("dead-after-completion task moved to %s", tk.Status)
	}
	if rep := s.CheckOnce(context.Background()); len(rep.Terminated) != 0 {
		t.Fatalf("terminated twice: %+v", rep.Terminated)
	}
}

// failingStop fails every stop and records whether the transcript was in
// the store when the stop was asked for.
type failingStop struct {
	monitor.Sandboxes
	st          *envStore
	savedBefore chan bool
}

type envStore = struct{ store.MonitorStore }

func (f *failingStop) Hibernate(ctx context.Context, tenantID, id string) (*sandbox.Info, error) {
	tasks, _ := f.st.ListTasks(ctx, store.ListTasksParams{SandboxID: id})
	ok := false
	if len(tasks) == 1 {
		tr, err := f.st.LatestTranscript(ctx, store.LatestTranscriptParams{TaskID: tasks[0].ID})
		ok = err == nil && strings.Contains(string(tr.Content), "precious work log")
	}
	f.savedBefore <- ok
	return nil, errors.New("injected: the stop failed")
}

// The transcript is saved BEFORE the stop, so a failing stop loses nothing,
// and the failure is recorded.
func TestTranscriptSavedBeforeStopEvenWhenStopFails(t *testing.T) {
	e := newEnv(t)
	fs := &failingStop{Sandboxes: e.mgr, st: &envStore{e.st}, savedBefore: make(chan bool, 1)}
	e.sbx = fs
	s := e.service(nil)
	task := e.runAgent(s, script(
		"echo 'precious work log'",
		"echo 'stderr note' >&2",
		heartbeatLoop("idle"),
		"wait",
	), func(p *monitor.CreateTaskParams) { p.TranscriptPath = "/workspace/no-such-transcript.jsonl" })
	e.activity(task.SandboxID, func(a *store.AgentActivity) bool { return a.LastHeartbeatAt != nil })
	e.advance(task.SandboxID, 3*time.Minute+time.Second, 45*time.Second)
	term := check(t, s, task.SandboxID)
	if term == nil || term.Decision.Reason != store.TerminationIdle {
		t.Fatalf("not terminated as idle: %+v", term)
	}
	if !<-fs.savedBefore {
		t.Fatal("the transcript was not in the store when the stop was called")
	}
	rec, err := e.st.GetTermination(context.Background(), task.SandboxID)
	if err != nil || rec.StopError == "" || rec.TranscriptID == "" {
		t.Fatalf("termination record %+v, %v: want the stop error and the transcript reference", rec, err)
	}
	tr, _ := e.st.GetTranscript(context.Background(), rec.TranscriptID)
	if !strings.Contains(string(tr.Content), "stderr note") || !strings.HasPrefix(tr.Source, "stdout") {
		t.Fatalf("transcript from %q: %q", tr.Source, tr.Content)
	}
	if got, _ := e.st.GetTask(context.Background(), task.ID); got.Status != store.TaskFailed || got.FailureReason != "idle_timeout" {
		t.Fatalf("task %s %q", got.Status, got.FailureReason)
	}
}

// A transcript file, when configured, is what is saved.
func TestTranscriptFromConfiguredPath(t *testing.T) {
	e := newEnv(t)
	s := e.service(nil)
	task := e.runAgent(s, script(
		"echo '{\"role\":\"assistant\",\"text\":\"hi\"}' > /workspace/transcript.jsonl",
		"agentkernel-agent heartbeat idle",
		"sleep 600",
	), func(p *monitor.CreateTaskParams) { p.TranscriptPath = "/workspace/transcript.jsonl" })
	e.activity(task.SandboxID, func(a *store.AgentActivity) bool { return a.LastHeartbeatAt != nil })
	e.clock.Advance(91 * time.Second)
	if term := check(t, s, task.SandboxID); term == nil {
		t.Fatal("dead agent not terminated")
	}
	tr, err := e.st.LatestTranscript(context.Background(), store.LatestTranscriptParams{TaskID: task.ID})
	if err != nil || tr.Source != "file:/workspace/transcript.jsonl" || !strings.Contains(string(tr.Content), `"assistant"`) {
		t.Fatalf("transcript %v: %+v", err, tr)
	}
}

func contentOf(tr *store.Transcript) string {
	if tr == nil {
		return ""
	}
	return string(tr.Content)
}

func assertStopped(t *testing.T, e *env, sbx string) {
	t.Helper()
	in, err := e.mgr.Get(context.Background(), "", sbx)
	if err != nil || in.State != sandbox.StateCold {
		t.Fatalf("sandbox %s after termination: %v %v, want cold (hibernated)", sbx, in, err)
	}
}

func assertAudit(t *testing.T, e *env, task *store.Task, reason store.TerminationReason, transcriptID string) {
	t.Helper()
	recs, err := e.st.ListAudit(context.Background(), store.ListAuditParams{TenantID: task.TenantID, Kind: monitor.AuditTerminated})
	if err != nil || len(recs) != 1 {
		t.Fatalf("audit: %v %d records", err, len(recs))
	}
	var data map[string]any
	_ = json.Unmarshal(recs[0].Data, &data)
	if data["reason"] != string(reason) || data["task_id"] != task.ID || data["transcript_id"] != transcriptID || data["duration_ms"] == nil {
		t.Fatalf("audit data %v", data)
	}
}
