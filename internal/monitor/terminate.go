package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// AuditTerminated is the audit kind (and event name) of a reaped sandbox.
const AuditTerminated = "SANDBOX_TERMINATED_IDLE"

// FailAfterTerminationClaim is the failpoint (Config.Failpoint) right
// after a termination is claimed, before its sequence runs: a daemon that
// dies there leaves the termination to ResumeTerminations.
const FailAfterTerminationClaim = "after-termination-claim"

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
	if in, err := s.sbx.Get(ctx, t.tenantID, t.sandboxID); err == nil {
		t.tenantID = in.TenantID
	}
	rec, err := s.st.RecordTermination(ctx, &store.Termination{
		SandboxID: t.sandboxID, TaskID: taskID(t.task), TenantID: t.tenantID, Reason: d.Reason,
		Duration: d.Duration, Completed: d.HasCompleted, Node: s.cfg.Node, At: now,
	})
	if errors.Is(err, store.ErrAlreadyExists) {
		return false // another node (or an earlier check) owns it
	}
	if err != nil {
		s.log.WarnContext(ctx, "monitor: record termination", "sandbox", t.sandboxID, "err", err)
		return false
	}
	if !s.inFlight(rec.SandboxID, true) {
		return false
	}
	defer s.inFlight(rec.SandboxID, false)
	s.failpoint(FailAfterTerminationClaim)
	s.carryOut(ctx, t, rec, d.State, d.Why)
	return true
}

// carryOut runs the sequence of a claimed termination. Each step looks at
// what is done already, so a termination resumed after a crash does the
// rest and nothing twice: the transcript saved since the claim is the one,
// a stopped sandbox is not stopped again, the task moves only from an
// active state, and the record finishes — with its audit, in the same
// transaction — once.
func (s *Service) carryOut(ctx context.Context, t *target, rec *store.Termination, state State, why string) {
	var sbState sandbox.State
	if in, err := s.sbx.Get(ctx, t.tenantID, t.sandboxID); err == nil {
		t.tenantID, sbState = in.TenantID, in.State
	}
	// The relay holds the sandbox's call lock while it long-polls.
	s.stopPump(t.sandboxID)

	// 1–2. Transcript first: once the sandbox stops, its output is gone.
	transcriptID := rec.TranscriptID
	if tr, err := s.st.LatestTranscript(ctx, store.LatestTranscriptParams{TaskID: rec.TaskID, SandboxID: t.sandboxID}); err == nil &&
		!tr.SavedAt.Before(rec.At) {
		transcriptID = tr.ID
	}
	if transcriptID == "" && (sbState == sandbox.StateActive || sbState == sandbox.StateWarming) {
		tr, err := s.saveTranscript(ctx, t)
		if err != nil {
			s.log.WarnContext(ctx, "monitor: transcript not saved", "sandbox", t.sandboxID, "err", err)
		} else {
			transcriptID = tr.ID
		}
	}

	// 3. Stop.
	var stopErr string
	if sbState != "" && sbState != sandbox.StateDestroyed && (s.cfg.Stop == StopDestroy || sbState != sandbox.StateCold) {
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
		to, reason := store.TaskFailed, string(rec.Reason)
		if rec.Completed {
			to, reason = store.TaskCompleted, ""
		}
		task, _ := s.finishTask(ctx, t.task.ID, store.ActiveTaskStatuses(), to, reason)
		if task != nil {
			taskStatus = task.Status
		}
	}

	// 5. Record the outcome and its audit, once, and log the event.
	data, _ := json.Marshal(map[string]any{
		"reason": rec.Reason, "duration_ms": rec.Duration.Milliseconds(), "task_id": rec.TaskID,
		"task_status": taskStatus, "transcript_id": transcriptID, "stop": s.cfg.Stop, "stop_error": stopErr,
		"state": state, "why": why, "node": s.cfg.Node, "terminated_at": rec.At,
	})
	_, err := s.st.FinishTermination(ctx, store.FinishTerminationParams{SandboxID: t.sandboxID, TranscriptID: transcriptID,
		StopError: stopErr, At: s.clock.Now(),
		Audit: &store.AuditRecord{TenantID: t.tenantID, Kind: AuditTerminated, Subject: t.sandboxID, Data: data, At: s.clock.Now()}})
	if errors.Is(err, store.ErrConflict) {
		return // finished by another node resuming it
	}
	if err != nil {
		s.log.WarnContext(ctx, "monitor: finish termination", "sandbox", t.sandboxID, "err", err)
	}
	s.log.InfoContext(ctx, AuditTerminated, "sandbox", t.sandboxID, "reason", rec.Reason, "duration", rec.Duration,
		"task", rec.TaskID, "task_status", taskStatus, "transcript", transcriptID, "stop_error", stopErr, "why", why)
}

// ResumeTerminations carries out the terminations a node claimed and did
// not finish because it died in their sequence: this node's at once at
// start (nothing of its earlier boot runs any more), any node's once they
// are older than resumeAfter. It returns how many it resumed.
func (s *Service) ResumeTerminations(ctx context.Context, atStart bool) int {
	ctx = context.WithoutCancel(ctx)
	before := s.clock.Now().Add(-resumeAfter)
	if atStart {
		before = s.clock.Now()
	}
	recs, err := s.st.ListUnfinishedTerminations(ctx, before)
	if err != nil {
		s.log.WarnContext(ctx, "monitor: list unfinished terminations", "err", err)
		return 0
	}
	n := 0
	for _, rec := range recs {
		if atStart && rec.Node != s.cfg.Node && s.clock.Now().Sub(rec.At) < resumeAfter {
			continue // another node's, maybe still at work
		}
		if !s.inFlight(rec.SandboxID, true) {
			continue
		}
		t := &target{sandboxID: rec.SandboxID, tenantID: rec.TenantID}
		if rec.TaskID != "" {
			if task, err := s.st.GetTask(ctx, rec.TaskID); err == nil {
				t.task = task
			}
		}
		s.log.InfoContext(ctx, "monitor: resuming an unfinished termination", "sandbox", rec.SandboxID,
			"claimed_by", rec.Node, "claimed_at", rec.At)
		s.carryOut(ctx, t, rec, "", "resumed: the node that claimed it died in its sequence")
		s.inFlight(rec.SandboxID, false)
		n++
	}
	return n
}

// resumeAfter: a termination unfinished for this long is taken to have
// lost its node (a live sequence takes seconds).
const resumeAfter = 5 * time.Minute

// inFlight marks (on) or unmarks a termination this process carries out;
// marking one already marked reports false.
func (s *Service) inFlight(sandboxID string, on bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !on {
		delete(s.terminating, sandboxID)
		return true
	}
	if s.terminating[sandboxID] {
		return false
	}
	s.terminating[sandboxID] = true
	return true
}

func (s *Service) failpoint(name string) {
	if s.cfg.Failpoint != nil {
		s.cfg.Failpoint(name)
	}
}
