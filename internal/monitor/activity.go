package monitor

import (
	"context"
	"errors"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ActivityReport is a sandbox's computed state and why (GET
// /v1/sandboxes/{id}/activity).
type ActivityReport struct {
	SandboxID   string
	Task        *store.Task // nil when no task ran in it
	Activity    *store.AgentActivity
	Decision    Decision
	Termination *store.Termination
	Thresholds  Thresholds
	At          time.Time
}

// Activity computes a sandbox's state now with Decide. created is the
// sandbox's creation, used while no event has arrived.
func (s *Service) Activity(ctx context.Context, sandboxID string, created time.Time) (*ActivityReport, error) {
	rep := &ActivityReport{SandboxID: sandboxID, Thresholds: s.cfg.Thresholds, At: s.clock.Now()}
	a, err := s.st.GetActivity(ctx, sandboxID)
	switch {
	case err == nil:
		rep.Activity = a
	case !errors.Is(err, store.ErrNotFound):
		return nil, err
	}
	tasks, err := s.st.ListTasks(ctx, store.ListTasksParams{SandboxID: sandboxID})
	if err != nil {
		return nil, err
	}
	if len(tasks) > 0 {
		rep.Task = tasks[len(tasks)-1]
		created = taskCreated(rep.Task)
	} else if a != nil {
		created = a.FirstEventAt
	}
	if term, err := s.st.GetTermination(ctx, sandboxID); err == nil {
		rep.Termination = term
	}
	rep.Decision = Decide(a, created, rep.At, s.cfg.Thresholds)
	if rep.Termination != nil && rep.Decision.State != StateTerminated {
		// A termination whose activity row predates it (or none).
		rep.Decision = Decision{State: StateTerminated, Reason: rep.Termination.Reason,
			Why: "terminated: " + string(rep.Termination.Reason)}
	}
	return rep, nil
}

// Store returns the monitor's store (the API reads tickets and tasks).
func (s *Service) Store() Store { return s.st }
