package monitor

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// DiagnosticContextPath is where a diagnostic task finds its context bundle
// (also in $AGENTKERNEL_DIAGNOSTIC_CONTEXT).
const DiagnosticContextPath = sandbox.RuntimePath + "/diagnostic/context.json"

// Bounds of the bundle.
const (
	bundleEvents         = 200
	bundleTranscriptTail = 16 << 10
)

// DiagnosticBundle is what a diagnostic agent gets about the workflow.
type DiagnosticBundle struct {
	Ticket *store.Ticket          `json:"ticket"`
	Tasks  []DiagnosticBundleTask `json:"tasks"`
}

// DiagnosticBundleTask is one task of the workflow with its evidence.
type DiagnosticBundleTask struct {
	Task           *store.Task        `json:"task"`
	Termination    *store.Termination `json:"termination,omitempty"`
	Events         []store.AgentEvent `json:"events,omitempty"` // the last ones
	TranscriptTail string             `json:"transcript_tail,omitempty"`
}

// writeDiagnosticContext writes the bundle (tasks, their last events and
// transcript tails) into the diagnostic task's sandbox.
func (s *Service) writeDiagnosticContext(ctx context.Context, t *store.Task) (string, error) {
	b, err := s.BuildDiagnosticBundle(ctx, t.TicketID, t.ID)
	if err != nil {
		return "", err
	}
	raw, err := json.MarshalIndent(b, "", "  ")
	if err != nil {
		return "", err
	}
	return DiagnosticContextPath, s.sbx.WriteFile(ctx, t.TenantID, t.SandboxID, DiagnosticContextPath, raw, 0o644)
}

// BuildDiagnosticBundle gathers a workflow's evidence, leaving out the
// diagnostic task itself.
func (s *Service) BuildDiagnosticBundle(ctx context.Context, ticketID, exceptTaskID string) (*DiagnosticBundle, error) {
	tk, err := s.st.GetTicket(ctx, ticketID)
	if err != nil {
		return nil, err
	}
	tasks, err := s.st.ListTasks(ctx, store.ListTasksParams{TicketID: ticketID})
	if err != nil {
		return nil, err
	}
	b := &DiagnosticBundle{Ticket: tk}
	for _, t := range tasks {
		if t.ID == exceptTaskID {
			continue
		}
		bt := DiagnosticBundleTask{Task: t}
		if t.SandboxID != "" {
			if term, err := s.st.GetTermination(ctx, t.SandboxID); err == nil {
				bt.Termination = term
			}
			if a, err := s.st.GetActivity(ctx, t.SandboxID); err == nil {
				evs, err := s.st.ListAgentEvents(ctx, store.ListAgentEventsParams{SandboxID: t.SandboxID, AfterSeq: max(0, a.LastSeq-bundleEvents)})
				if err != nil {
					return nil, err
				}
				bt.Events = evs
			}
		}
		tr, err := s.st.LatestTranscript(ctx, store.LatestTranscriptParams{TaskID: t.ID})
		switch {
		case err == nil:
			c := tr.Content
			if len(c) > bundleTranscriptTail {
				c = c[len(c)-bundleTranscriptTail:]
			}
			bt.TranscriptTail = string(c)
		case !errors.Is(err, store.ErrNotFound):
			return nil, err
		}
		b.Tasks = append(b.Tasks, bt)
	}
	return b, nil
}
