package monitor

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Paths inside a task's sandbox.
const (
	// AgentBinDir holds the agentkernel-agent wrapper; it is first on PATH.
	// It is in the guest's runtime dir, which survives hibernation with the
	// workspace without being among the agent's files.
	AgentBinDir = sandbox.RuntimePath + "/bin"
	// AgentBinaryPath is where a stand-alone agentkernel-agent may be
	// mounted; otherwise the guest binary (agentkernel) serves the CLI.
	AgentBinaryPath = "/.agentkernel/agentkernel-agent"
	// agentWrapper runs the event CLI.
	agentWrapper = "#!/bin/sh\nif [ -x " + AgentBinaryPath + " ]; then exec " + AgentBinaryPath + " \"$@\"; fi\nexec " +
		sandbox.GuestBinaryPath + " agent-event \"$@\"\n"
	basePath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
)

// launch runs a pending task: claim it (CAS pending → claiming, so one
// node launches it), create its sandbox, start its command as a background
// process, and move it to running. Any failure fails the task with the
// reason.
func (s *Service) launch(ctx context.Context, t *store.Task) {
	tr, err := s.st.TransitionTask(ctx, store.TransitionTaskParams{ID: t.ID, From: []store.TaskStatus{store.TaskPending}, To: store.TaskClaiming, At: s.clock.Now()})
	if err != nil || !tr.OK {
		return
	}
	t = tr.Task
	fail := func(reason string, err error) {
		s.log.WarnContext(ctx, "monitor: task launch failed", "task", t.ID, "reason", reason, "err", err)
		r := fmt.Sprintf("%s: %v", reason, err)
		s.finishTask(context.WithoutCancel(ctx), t.ID, store.ActiveTaskStatuses(), store.TaskFailed, r)
	}
	var spec SandboxSpec
	_ = json.Unmarshal(t.SandboxSpec, &spec)
	p := spec.CreateParams(t.TenantID)
	p.Metadata = map[string]string{"task": t.ID, "ticket": t.TicketID}
	// The monitor decides when a task's sandbox stops, transcript first; the
	// sandbox layer's own idle hibernation is only a safety net behind it,
	// or it could stop an exited agent's sandbox before the monitor saved
	// its output.
	p.SleepAfter = s.safetySleepAfter()
	if spec.WorkspaceFrom != "" && s.cfg.Workspaces != nil {
		// The claim checked clone_ready: the source is stopped, so the
		// snapshot is of a workspace no one is writing.
		snap, err := s.cfg.Workspaces.Snapshot(ctx, t.TenantID, spec.WorkspaceFrom)
		if err != nil {
			fail("workspace_clone_failed", err)
			return
		}
		p.Seed = s.cfg.Workspaces.Seeder(snap)
	}
	in, err := s.sbx.Create(ctx, p)
	if err != nil {
		fail("sandbox_create_failed", err)
		return
	}
	sbID := in.ID
	tr, err = s.st.TransitionTask(ctx, store.TransitionTaskParams{ID: t.ID, From: []store.TaskStatus{store.TaskClaiming}, To: store.TaskAssigned,
		Patch: store.TaskPatch{SandboxID: &sbID}, At: s.clock.Now()})
	if err != nil || !tr.OK {
		s.log.WarnContext(ctx, "monitor: task changed while launching", "task", t.ID, "err", err)
		return
	}
	t = tr.Task
	if err := s.sbx.WriteFile(ctx, t.TenantID, sbID, AgentBinDir+"/agentkernel-agent", []byte(agentWrapper), 0o755); err != nil {
		fail("sandbox_prepare_failed", err)
		return
	}
	env := map[string]string{"PATH": AgentBinDir + ":" + basePath}
	if t.Kind == store.TaskDiagnostic {
		p, err := s.writeDiagnosticContext(ctx, t)
		if err != nil {
			fail("diagnostic_context_failed", err)
			return
		}
		env["AGENTKERNEL_DIAGNOSTIC_CONTEXT"] = p
	}
	var user map[string]string
	_ = json.Unmarshal(t.Env, &user)
	for k, v := range user {
		env[k] = v
	}
	env["AGENTKERNEL_TASK_ID"], env["AGENTKERNEL_SANDBOX_ID"], env["AGENTKERNEL_TICKET_ID"] = t.ID, sbID, t.TicketID
	var argv []string
	_ = json.Unmarshal(t.Command, &argv)
	proc, err := s.sbx.StartProcess(ctx, t.TenantID, sbID, guest.ExecRequest{Argv: argv, Env: env})
	if err != nil {
		fail("agent_start_failed", err)
		return
	}
	pid := proc.ID
	tr, err = s.st.TransitionTask(ctx, store.TransitionTaskParams{ID: t.ID, From: []store.TaskStatus{store.TaskAssigned}, To: store.TaskRunning,
		Patch: store.TaskPatch{ProcessID: &pid}, At: s.clock.Now()})
	if err != nil || !tr.OK {
		s.log.WarnContext(ctx, "monitor: task changed while starting", "task", t.ID, "err", err)
		return
	}
	s.log.InfoContext(ctx, "monitor: task running", "task", t.ID, "sandbox", sbID, "process", pid)
	s.ensurePump(tr.Task)
}

// finishTask moves a task to a terminal status only from the given states
// (a CAS: a completed task is never moved to failed by a stale writer) and
// counts a diagnostic task's outcome once.
func (s *Service) finishTask(ctx context.Context, id string, from []store.TaskStatus, to store.TaskStatus, reason string) (*store.Task, bool) {
	p := store.TransitionTaskParams{ID: id, From: from, To: to, At: s.clock.Now()}
	if reason != "" {
		p.Patch.FailureReason = &reason
	}
	tr, err := s.st.TransitionTask(ctx, p)
	if err != nil {
		s.log.WarnContext(ctx, "monitor: task transition", "task", id, "to", to, "err", err)
		return nil, false
	}
	if tr.OK && tr.Task.Kind == store.TaskDiagnostic && tr.Task.TicketID != "" {
		s.recordDiagnosticOutcome(ctx, tr.Task)
	}
	return tr.Task, tr.OK
}

// safetySleepAfter is twice the longest threshold plus a check interval:
// every rule of Decide fires well within it.
func (s *Service) safetySleepAfter() time.Duration {
	th := s.cfg.Thresholds
	return 2*max(th.Idle, th.Heartbeat, th.StuckRunning, th.PostCompletion) + s.cfg.CheckInterval
}
