package agentkernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// TestTaskReapedThroughTheAPI is the README's walk-through: a shell-script
// agent that reports through agentkernel-agent (the guest binary inside the
// sandbox) goes idle and is reaped, its transcript saved, its task failed
// idle_timeout; a completed agent's task stays completed. Thresholds are
// shortened so the real clock does it in seconds.
func TestTaskReapedThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t, func(c *config.Config) {
		c.Monitor.CheckInterval = config.Duration(100 * time.Millisecond)
		c.Monitor.IdleThreshold = config.Duration(2 * time.Second)
		c.Monitor.PostCompletionTimeout = config.Duration(time.Hour)
	})
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	tk, err := c.Tickets().Create(ctx, agentkernel.TicketCreateParams{Title: "say hello"})
	if err != nil {
		t.Fatal(err)
	}
	idle, err := c.Tasks().Create(ctx, agentkernel.TaskCreateParams{TicketID: tk.ID, Command: []string{"/bin/sh", "-c",
		"agentkernel-agent event agent.started && echo 'thinking about hello' && " +
			"while :; do agentkernel-agent heartbeat idle; sleep 0.2; done"}})
	if err != nil {
		t.Fatal(err)
	}
	done, err := c.Tasks().Create(ctx, agentkernel.TaskCreateParams{TicketID: tk.ID, Command: []string{"/bin/sh", "-c",
		"agentkernel-agent heartbeat running && echo hello > /workspace/hello.txt && agentkernel-agent event agent.file_edited && " +
			"agentkernel-agent event agent.completed && while :; do agentkernel-agent heartbeat idle; sleep 0.2; done"}})
	if err != nil {
		t.Fatal(err)
	}
	wait := func(id string, ok func(*agentkernel.Task) bool) *agentkernel.Task {
		deadline := time.Now().Add(60 * time.Second)
		for {
			got, err := c.Tasks().Get(ctx, id)
			if err == nil && ok(got) {
				return got
			}
			if time.Now().After(deadline) {
				t.Fatalf("task %s: %+v %v", id, got, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	got := wait(idle.ID, func(t *agentkernel.Task) bool { return t.Status == "failed" })
	if got.FailureReason != "idle_timeout" {
		t.Fatalf("idle agent: %s %q", got.Status, got.FailureReason)
	}
	tr, err := c.Tasks().Transcript(ctx, idle.ID)
	if err != nil || !strings.Contains(tr.Content, "thinking about hello") {
		t.Fatalf("transcript %+v %v", tr, err)
	}
	a, err := c.Sandboxes.Activity(ctx, got.SandboxID)
	if err != nil || a.State != "TERMINATED" {
		t.Fatalf("activity %+v %v", a, err)
	}
	// The completed agent idles past the idle threshold but is not reaped
	// as idle, and its task is completed.
	dt := wait(done.ID, func(t *agentkernel.Task) bool { return t.SandboxID != "" })
	var act *agentkernel.Activity
	deadline := time.Now().Add(30 * time.Second)
	for {
		act, err = c.Sandboxes.Activity(ctx, dt.SandboxID)
		if err == nil && act.State == "COMPLETED" && act.DurationMS > 2500 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("completed agent's activity: %+v %v", act, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if act.WillTerminate || !act.HasCompleted || act.IsIdle {
		t.Fatalf("completed agent judged %+v", act)
	}
	if dt, _ = c.Tasks().Get(ctx, done.ID); dt.Status != "running" {
		t.Fatalf("completed agent's task (still alive) is %s", dt.Status)
	}
	// The agent's workspace holds its own work and nothing of the runtime
	// (not the agentkernel-agent wrapper, not the events it posted).
	if res, err := c.Sandboxes.Exec(ctx, dt.SandboxID, agentkernel.ExecParams{Command: "find /workspace"}); err != nil || res.Stdout != "/workspace\n/workspace/hello.txt\n" {
		t.Fatalf("task sandbox's workspace: %+v %v", res, err)
	}

	// Bad events say what is wrong.
	for _, tc := range []struct {
		ev   agentkernel.AgentEventInput
		want string
	}{
		{agentkernel.AgentEventInput{Type: "agent.napping"}, `"agent.napping" is not an agent event type`},
		{agentkernel.AgentEventInput{Type: "agent.heartbeat", Status: "zzz"}, `events[0].status: "zzz"`},
		{agentkernel.AgentEventInput{Type: "agent.tool_use", At: ptr(time.Now().Add(time.Hour))}, "in the future; the allowed clock skew is 5s"},
		{agentkernel.AgentEventInput{Type: "agent.tool_use", Data: json.RawMessage(`"` + strings.Repeat("x", 70_000) + `"`)}, "the limit is 65536"},
	} {
		_, err := c.Sandboxes.PostEvents(ctx, dt.SandboxID, tc.ev)
		var ae *agentkernel.Error
		if !errors.As(err, &ae) || ae.StatusCode != 422 || !strings.Contains(ae.Message, tc.want) {
			t.Errorf("%s: got %v, want 422 containing %q", tc.ev.Type, err, tc.want)
		}
	}
	if _, err := c.Sandboxes.PostEvents(ctx, "sbx_nope", agentkernel.AgentEventInput{Type: "agent.started"}); err == nil {
		t.Error("events for an unknown sandbox accepted")
	}
	res, err := c.Tickets().SubmitResult(ctx, tk.ID, agentkernel.WorkflowResult{Result: json.RawMessage(`{"ok":true}`), ValidationStatus: "valid"})
	if err != nil || res.ValidationStatus != "valid" {
		t.Fatalf("submit result: %+v %v", res, err)
	}
	if _, err := c.Tickets().SubmitResult(ctx, tk.ID, agentkernel.WorkflowResult{Result: json.RawMessage(`1`), ValidationStatus: "great"}); err == nil ||
		!strings.Contains(err.Error(), `"great" is not pending, valid or invalid`) {
		t.Fatalf("bad validation status: %v", err)
	}
	show, err := c.Tickets().Get(ctx, tk.ID)
	if err != nil || len(show.Tasks) != 2 || show.Result == nil {
		t.Fatalf("ticket %+v %v", show, err)
	}
}

func ptr[T any](v T) *T { return &v }

// TestTaskWithAnImpossibleSandboxIsRefused: a task's sandbox is created when
// it launches, but a request it could never be created for (a limit out of
// bounds, a network the operator forbids, an unknown driver) is refused at
// once, naming the field, and no task is recorded.
func TestTaskWithAnImpossibleSandboxIsRefused(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	for _, tc := range []struct {
		sb     agentkernel.TaskSandbox
		status int
		want   string
	}{
		{agentkernel.TaskSandbox{Limits: &agentkernel.SandboxLimits{Pids: 2}}, 400, "sandbox.limits.pids"},
		{agentkernel.TaskSandbox{Limits: &agentkernel.SandboxLimits{MemoryMB: 1 << 40}}, 400, "sandbox.limits.memory_mb"},
		{agentkernel.TaskSandbox{Network: "host"}, 403, "allow_host_network"},
		{agentkernel.TaskSandbox{Driver: "vm"}, 422, `"vm"`},
	} {
		_, err := c.Tasks().Create(ctx, agentkernel.TaskCreateParams{Command: []string{"true"}, Sandbox: &tc.sb})
		if !isStatus(err, tc.status) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("task with sandbox %+v: %v, want %d naming %s", tc.sb, err, tc.status, tc.want)
		}
	}
	if list, err := c.Tasks().List(ctx, agentkernel.TaskListParams{}); err != nil || len(list) != 0 {
		t.Fatalf("refused tasks were recorded: %v %v", list, err)
	}
}
