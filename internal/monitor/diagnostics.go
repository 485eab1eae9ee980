package monitor

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// DiagnosticConfig is the diagnostic sweep (seed 001 find_stuck_workflows).
type DiagnosticConfig struct {
	Interval       time.Duration // default 60 s
	StuckThreshold time.Duration // default 60 s
	Rules          store.DiagnosticRules
	// Command is the diagnostic agent's argv; empty = stuck workflows are
	// reported but no diagnostic is spawned.
	Command []string
	Env     map[string]string
}

func (c *DiagnosticConfig) defaults() {
	if c.Interval <= 0 {
		c.Interval = 60 * time.Second
	}
	if c.StuckThreshold <= 0 {
		c.StuckThreshold = 60 * time.Second
	}
	if c.Rules.MaxPerWorkflow <= 0 {
		c.Rules.MaxPerWorkflow = 3
	}
	if c.Rules.MaxConsecutiveFailures <= 0 {
		c.Rules.MaxConsecutiveFailures = 2
	}
	if c.Rules.Cooldown <= 0 {
		c.Rules.Cooldown = 5 * time.Minute
	}
}

// Workflow verdicts of find_stuck_workflows, in the seed's order.
const (
	SkipNoTasks         = "no_tasks"
	SkipInProgress      = "in_progress"
	SkipValidatedResult = "validated_result"
	SkipAllCompleted    = "all_completed"
	SkipHumanReview     = "human_review"
	SkipNotStuckYet     = "not_stuck_yet"
	Stuck               = "stuck"
)

// WorkflowVerdict is find_stuck_workflows' conclusion about one ticket.
type WorkflowVerdict struct {
	TicketID string
	Verdict  string
	// Since is when its last task finished (for stuck / not_stuck_yet).
	Since time.Time
}

// FindStuckWorkflows is the seed's find_stuck_workflows over every ticket
// that is not done: conditions 1–5 and the stuck-time check. The spawn
// safeguards (pending diagnostic, consecutive failures, max per workflow,
// cooldown) are checked by the store's atomic claim in SweepDiagnostics.
func (s *Service) FindStuckWorkflows(ctx context.Context) ([]WorkflowVerdict, error) {
	tickets, err := s.st.ListTickets(ctx, store.ListTicketsParams{Statuses: []store.TicketStatus{store.TicketOpen}})
	if err != nil {
		return nil, err
	}
	now := s.clock.Now()
	out := make([]WorkflowVerdict, 0, len(tickets))
	for _, tk := range tickets {
		v, err := s.judge(ctx, tk.ID, now)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	return out, nil
}

func (s *Service) judge(ctx context.Context, ticketID string, now time.Time) (WorkflowVerdict, error) {
	v := WorkflowVerdict{TicketID: ticketID}
	tasks, err := s.st.ListTasks(ctx, store.ListTasksParams{TicketID: ticketID})
	if err != nil {
		return v, err
	}
	// Condition 1: has tasks.
	if len(tasks) == 0 {
		v.Verdict = SkipNoTasks
		return v, nil
	}
	var completed, failed, completedDiag, failedOrig int
	var last time.Time
	for _, t := range tasks {
		// Condition 2: every task finished (a pending diagnostic is active
		// too, so this is also the seed's "pending diagnostic tasks").
		if t.Status.Active() {
			v.Verdict = SkipInProgress
			return v, nil
		}
		switch t.Status {
		case store.TaskCompleted:
			completed++
			if t.Kind == store.TaskDiagnostic {
				completedDiag++
			}
		case store.TaskFailed:
			failed++
			if t.Kind != store.TaskDiagnostic {
				failedOrig++
			}
		}
		if t.FinishedAt != nil && t.FinishedAt.After(last) {
			last = *t.FinishedAt
		} else if t.FinishedAt == nil && t.UpdatedAt.After(last) {
			last = t.UpdatedAt
		}
	}
	// Condition 3: a validated WorkflowResult.
	if r, err := s.st.GetWorkflowResult(ctx, ticketID); err == nil && r.ValidationStatus == store.ValidationValid {
		v.Verdict = SkipValidatedResult
		return v, nil
	} else if err != nil && !errors.Is(err, store.ErrNotFound) {
		return v, err
	}
	// Condition 4: all tasks completed without failures needs no result.
	if completed > 0 && failed == 0 {
		v.Verdict = SkipAllCompleted
		return v, nil
	}
	// Condition 5: a diagnostic already completed and the originals still
	// failed: more diagnostics would loop; a human must look.
	if completedDiag > 0 && failedOrig > 0 {
		v.Verdict = SkipHumanReview
		if _, err := s.st.MarkHumanReview(ctx, store.MarkHumanReviewParams{TicketID: ticketID,
			Reason: "a diagnostic completed but original tasks are still failed", At: now}); err != nil {
			return v, err
		}
		return v, nil
	}
	// Stuck time since the last task finished.
	v.Since = last
	if now.Sub(last) < s.cfg.Diagnostics.StuckThreshold {
		v.Verdict = SkipNotStuckYet
		return v, nil
	}
	v.Verdict = Stuck
	return v, nil
}

// SweepReport is what one diagnostic sweep did.
type SweepReport struct {
	Verdicts []WorkflowVerdict
	Spawned  []*store.Task
	Refused  map[string]store.DiagnosticRefusal // ticket → safeguard
	Err      error
}

// SweepDiagnostics finds stuck workflows and spawns one diagnostic task
// per stuck workflow through the store's atomic claim: every safeguard is
// checked and the task created in one transaction, so restarts and several
// nodes never spawn twice.
func (s *Service) SweepDiagnostics(ctx context.Context) SweepReport {
	rep := SweepReport{Refused: map[string]store.DiagnosticRefusal{}}
	s.reconcileDiagnostics(ctx)
	vs, err := s.FindStuckWorkflows(ctx)
	if err != nil {
		rep.Err = err
		s.log.WarnContext(ctx, "monitor: find stuck workflows", "err", err)
		return rep
	}
	rep.Verdicts = vs
	for _, v := range vs {
		if v.Verdict != Stuck {
			continue
		}
		if len(s.cfg.Diagnostics.Command) == 0 {
			s.log.InfoContext(ctx, "monitor: stuck workflow (no diagnostic_command configured)", "ticket", v.TicketID)
			continue
		}
		tk, err := s.st.GetTicket(ctx, v.TicketID)
		if err != nil {
			continue
		}
		cmd, _ := json.Marshal(s.cfg.Diagnostics.Command)
		env, _ := json.Marshal(s.cfg.Diagnostics.Env)
		if s.cfg.Diagnostics.Env == nil {
			env = []byte("{}")
		}
		spec, err := s.diagnosticSpec(ctx, tk)
		if err != nil {
			s.log.WarnContext(ctx, "monitor: diagnostic sandbox", "ticket", v.TicketID, "err", err)
			continue
		}
		rawSpec, _ := json.Marshal(spec)
		claim, err := s.st.ClaimDiagnosticSpawn(ctx, store.ClaimDiagnosticParams{
			TicketID: v.TicketID, Now: s.clock.Now(), Rules: s.cfg.Diagnostics.Rules, CloneFrom: spec.WorkspaceFrom,
			Task: &store.Task{TenantID: tk.TenantID, Command: cmd, Env: env, DiagnosticOf: v.TicketID, SandboxSpec: rawSpec},
		})
		if err != nil {
			s.log.WarnContext(ctx, "monitor: claim diagnostic", "ticket", v.TicketID, "err", err)
			continue
		}
		if !claim.OK {
			rep.Refused[v.TicketID] = claim.Refusal
			continue
		}
		rep.Spawned = append(rep.Spawned, claim.Task)
		s.log.InfoContext(ctx, "monitor: diagnostic spawned", "ticket", v.TicketID, "task", claim.Task.ID, "attempt", claim.State.Attempts)
		task := claim.Task
		s.goTracked(func(ctx context.Context) { s.launch(ctx, task) })
	}
	return rep
}

// diagnosticSpec is the sandbox a diagnostic of the ticket runs in: the
// one its latest original task ran in (same driver, image and limits) and,
// when workspaces can be cloned, starting with a clone of that task's
// workspace, so the diagnostic sees what the agent left. A sandbox that no
// longer has a workspace (destroyed) has nothing to clone.
func (s *Service) diagnosticSpec(ctx context.Context, tk *store.Ticket) (SandboxSpec, error) {
	tasks, err := s.st.ListTasks(ctx, store.ListTasksParams{TicketID: tk.ID, Kind: store.TaskAgent})
	if err != nil {
		return SandboxSpec{}, err
	}
	var src *store.Task
	for _, t := range tasks {
		if t.TenantID == tk.TenantID && t.SandboxID != "" && (src == nil || !t.CreatedAt.Before(src.CreatedAt)) {
			src = t
		}
	}
	var spec SandboxSpec
	if src == nil {
		return spec, nil
	}
	_ = json.Unmarshal(src.SandboxSpec, &spec)
	spec.WorkspaceFrom = ""
	if s.cfg.Workspaces == nil {
		return spec, nil
	}
	in, err := s.sbx.Get(ctx, tk.TenantID, src.SandboxID)
	switch {
	case errors.Is(err, store.ErrNotFound):
		return spec, nil
	case err != nil:
		return SandboxSpec{}, err
	case in.State != sandbox.StateDestroyed:
		spec.WorkspaceFrom = src.SandboxID
	}
	return spec, nil
}

// recordDiagnosticOutcome counts a finished diagnostic once (the store
// refuses a second count with ErrConflict).
func (s *Service) recordDiagnosticOutcome(ctx context.Context, t *store.Task) {
	_, err := s.st.RecordDiagnosticOutcome(ctx, store.DiagnosticOutcomeParams{
		TicketID: t.TicketID, TaskID: t.ID, Success: t.Status == store.TaskCompleted, At: s.clock.Now()})
	if err != nil && !errors.Is(err, store.ErrConflict) {
		s.log.WarnContext(ctx, "monitor: record diagnostic outcome", "task", t.ID, "err", err)
	}
}

// reconcileDiagnostics counts outcomes a crash left uncounted: a pending
// diagnostic whose task already finished.
func (s *Service) reconcileDiagnostics(ctx context.Context) {
	tasks, err := s.st.ListTasks(ctx, store.ListTasksParams{Kind: store.TaskDiagnostic,
		Statuses: []store.TaskStatus{store.TaskCompleted, store.TaskFailed, store.TaskCancelled}})
	if err != nil {
		return
	}
	for _, t := range tasks {
		st, err := s.st.GetDiagnosticState(ctx, t.TicketID)
		if err == nil && st.PendingTaskID == t.ID {
			s.recordDiagnosticOutcome(ctx, t)
		}
	}
}
