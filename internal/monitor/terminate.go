package monitor

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// AuditTerminated is the audit kind (and event name) of a reaped sandbox.
const AuditTerminated = "SANDBOX_TERMINATED_IDLE"

// terminate runs the seed's termination sequence for one sandbox. The
// termination record is claimed first (unique per sandbox), so of several
// nodes exactly one runs the sequence; then, in the seed's order:
//  1. extract the transcript, 2. save it, 3. stop the sandbox, 4. update
//     the task only from an active state (never a completed task to failed),
//  5. emit SANDBOX_TERMINATED_IDLE (audit log + daemon log).
//
// It reports whether this node terminated the sandbox.
func (s *Service) terminate(ctx context.Context, t *target, d Decision) bool {
	// The sequence must finish even when the service is stopping.
	ctx = context.WithoutCancel(ctx)
	now := s.clock.Now()
	if t.task == nil {
		if tasks, err := s.st.ListTasks(ctx, store.ListTasksParams{SandboxID: t.sandboxID}); err == nil && len(tasks) > 0 {
			t.task = tasks[len(tasks)-1]
		}
	}
	if t.task != nil {
		t.tenantID = t.task.TenantID
	}
	var state sandbox.State
	if in, err := s.sbx.Get(ctx, t.tenantID, t.sandboxID); err == nil {
		t.tenantID, state = in.TenantID, in.State
	}
	rec, err := s.st.RecordTermination(ctx, &store.Termination{
		SandboxID: t.sandboxID, TaskID: taskID(t.task), TenantID: t.tenantID, Reason: d.Reason,
		Duration: d.Duration, Node: s.cfg.Node, At: now,
	})
	if errors.Is(err, store.ErrAlreadyExists) {
		return false // another node (or an earlier check) owns it
	}
	if err != nil {
		s.log.WarnContext(ctx, "monitor: record termination", "sandbox", t.sandboxID, "err", err)
		return false
	}
	// The relay holds the sandbox's call lock while it long-polls.
	s.stopPump(t.sandboxID)

	// 1–2. Transcript first: once the sandbox stops, its output is gone.
	var transcriptID string
	if state == sandbox.StateActive || state == sandbox.StateWarming {
		tr, err := s.saveTranscript(ctx, t)
		if err != nil {
			s.log.WarnContext(ctx, "monitor: transcript not saved", "sandbox", t.sandboxID, "err", err)
		} else {
			transcriptID = tr.ID
		}
	}

	// 3. Stop.
	var stopErr string
	if state != "" && state != sandbox.StateDestroyed {
		var err error
		if s.cfg.Stop == StopDestroy {
			_, err = s.sbx.Destroy(ctx, t.tenantID, t.sandboxID)
		} else {
			_, err = s.sbx.Hibernate(ctx, t.tenantID, t.sandboxID)
		}
		if err != nil {
			stopErr = err.Error()
			s.log.WarnContext(ctx, "monitor: stop failed; transcript already saved", "sandbox", t.sandboxID, "err", err)
		}
	}

	// 4. Task: only from the active states. A completed agent's task is
	// completed, never failed.
	var taskStatus store.TaskStatus
	if t.task != nil {
		to, reason := store.TaskFailed, string(d.Reason)
		if d.HasCompleted {
			to, reason = store.TaskCompleted, ""
		}
		task, _ := s.finishTask(ctx, t.task.ID, store.ActiveTaskStatuses(), to, reason)
		if task != nil {
			taskStatus = task.Status
		}
	}

	// 5. Record the outcome and emit the event.
	if _, err := s.st.FinishTermination(ctx, store.FinishTerminationParams{SandboxID: t.sandboxID, TranscriptID: transcriptID, StopError: stopErr, At: s.clock.Now()}); err != nil {
		s.log.WarnContext(ctx, "monitor: finish termination", "sandbox", t.sandboxID, "err", err)
	}
	data, _ := json.Marshal(map[string]any{
		"reason": d.Reason, "duration_ms": d.Duration.Milliseconds(), "task_id": taskID(t.task),
		"task_status": taskStatus, "transcript_id": transcriptID, "stop": s.cfg.Stop, "stop_error": stopErr,
		"state": d.State, "why": d.Why, "node": s.cfg.Node, "terminated_at": rec.At,
	})
	if err := s.st.AppendAudit(ctx, &store.AuditRecord{TenantID: t.tenantID, Kind: AuditTerminated, Subject: t.sandboxID, Data: data, At: s.clock.Now()}); err != nil {
		s.log.WarnContext(ctx, "monitor: audit", "sandbox", t.sandboxID, "err", err)
	}
	s.log.InfoContext(ctx, AuditTerminated, "sandbox", t.sandboxID, "reason", d.Reason, "duration", d.Duration,
		"task", taskID(t.task), "task_status", taskStatus, "transcript", transcriptID, "stop_error", stopErr, "why", d.Why)
	return true
}
