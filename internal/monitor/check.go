package monitor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// CheckReport is what one check did (a test signal and a log line).
type CheckReport struct {
	At         time.Time
	Checked    int
	Terminated []Termination
	Exited     []string // tasks whose agent process ended
	Err        error
}

// Termination is one reaped sandbox.
type Termination struct {
	SandboxID string
	TaskID    string
	Decision  Decision
}

// target is one monitored sandbox: its activity (nil before its first
// event) and its task (nil when none is known).
type target struct {
	sandboxID string
	tenantID  string
	activity  *store.AgentActivity
	task      *store.Task
	created   time.Time
}

// CheckOnce runs one check of every monitored sandbox: launch pending
// tasks, notice exited agents, decide, and terminate what must go.
func (s *Service) CheckOnce(ctx context.Context) CheckReport {
	rep := CheckReport{At: s.clock.Now()}
	defer func() {
		if s.cfg.Checked != nil {
			select {
			case s.cfg.Checked <- rep:
			case <-ctx.Done():
			}
		}
	}()
	targets, err := s.targets(ctx, &rep)
	if err != nil {
		rep.Err = err
		s.log.WarnContext(ctx, "monitor: check", "err", err)
		return rep
	}
	now := s.clock.Now()
	for _, t := range targets {
		rep.Checked++
		d := Decide(t.activity, t.created, now, s.cfg.Thresholds)
		if !d.Terminate {
			continue
		}
		if s.terminate(ctx, t, d) {
			rep.Terminated = append(rep.Terminated, Termination{SandboxID: t.sandboxID, TaskID: taskID(t.task), Decision: d})
		}
	}
	return rep
}

// targets gathers the monitored sandboxes with two listings: the active
// tasks and the activity summaries not yet terminated.
func (s *Service) targets(ctx context.Context, rep *CheckReport) ([]*target, error) {
	now := s.clock.Now()
	pending, err := s.st.ListTasks(ctx, store.ListTasksParams{Statuses: []store.TaskStatus{store.TaskPending}})
	if err != nil {
		return nil, err
	}
	for _, t := range pending {
		s.goTracked(func(ctx context.Context) { s.launch(ctx, t) })
	}
	active, err := s.st.ListTasks(ctx, store.ListTasksParams{Statuses: []store.TaskStatus{store.TaskClaiming, store.TaskAssigned, store.TaskRunning}})
	if err != nil {
		return nil, err
	}
	bySandbox := make(map[string]*store.Task, len(active))
	for _, t := range active {
		if t.SandboxID == "" {
			// A launch that died with its node before it made a sandbox.
			if now.Sub(t.UpdatedAt) > s.cfg.Thresholds.Heartbeat {
				s.finishTask(ctx, t.ID, []store.TaskStatus{store.TaskClaiming}, store.TaskFailed, "launch_interrupted")
			}
			continue
		}
		bySandbox[t.SandboxID] = t
		if t.Status == store.TaskRunning && t.ProcessID != "" && !s.hasPump(t.SandboxID) {
			// No relay watches it (a restart, or relays are off): look
			// for an exit here, then start one.
			if s.checkExit(ctx, t) {
				rep.Exited = append(rep.Exited, t.ID)
				continue
			}
			s.ensurePump(t)
		}
	}
	acts, err := s.st.ListActivities(ctx, store.ListActivitiesParams{})
	if err != nil {
		return nil, err
	}
	out := make([]*target, 0, len(acts)+len(bySandbox))
	for _, a := range acts {
		t := &target{sandboxID: a.SandboxID, activity: a, created: a.FirstEventAt}
		if task := bySandbox[a.SandboxID]; task != nil {
			t.task, t.tenantID, t.created = task, task.TenantID, taskCreated(task)
			delete(bySandbox, a.SandboxID)
		}
		out = append(out, t)
	}
	for id, task := range bySandbox {
		// An agent that has not said anything yet: CREATED, then DEAD.
		out = append(out, &target{sandboxID: id, tenantID: task.TenantID, task: task, created: taskCreated(task)})
	}
	return out, nil
}

func taskCreated(t *store.Task) time.Time {
	if t.StartedAt != nil {
		return *t.StartedAt
	}
	return t.UpdatedAt
}

func taskID(t *store.Task) string {
	if t == nil {
		return ""
	}
	return t.ID
}

// checkExit finishes a running task whose agent process ended, for a
// task no relay watches (the relay notices exits itself): completed on exit
// 0 or when the agent reported agent.completed with no work after it,
// failed otherwise. The sandbox itself is left to the seed's rules (its
// heartbeats stop, so it is reaped as DEAD with its transcript).
func (s *Service) checkExit(ctx context.Context, t *store.Task) bool {
	code, exited := s.processExited(ctx, t)
	if !exited {
		return false
	}
	s.drain(ctx, t, 0)
	return s.finishExited(ctx, t, code)
}

// processExited asks the guest whether the task's agent process ended.
func (s *Service) processExited(ctx context.Context, t *store.Task) (int, bool) {
	in, err := s.sbx.Get(ctx, t.TenantID, t.SandboxID)
	if err != nil || in.State != sandbox.StateActive {
		return 0, false
	}
	var proc *guest.ProcessInfo
	err = s.sbx.Client(ctx, t.TenantID, t.SandboxID, func(c *guest.Client) error {
		ps, err := c.ListProcesses(ctx)
		for i := range ps {
			if ps[i].ID == t.ProcessID {
				proc = &ps[i]
			}
		}
		return err
	})
	if err != nil || proc == nil || proc.Running {
		return 0, false
	}
	if proc.ExitCode == nil {
		return -1, true
	}
	return *proc.ExitCode, true
}

// finishExited settles an exited agent's task once its last events are
// stored (agent.completed may be among them).
func (s *Service) finishExited(ctx context.Context, t *store.Task, code int) bool {
	to, reason := store.TaskCompleted, ""
	if code != 0 {
		a, err := s.st.GetActivity(ctx, t.SandboxID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return false
		}
		if !hasCompleted(a) {
			to, reason = store.TaskFailed, fmt.Sprintf("exit_code_%d", code)
		}
	}
	_, ok := s.finishTask(ctx, t.ID, []store.TaskStatus{store.TaskRunning}, to, reason)
	if ok {
		s.log.InfoContext(ctx, "monitor: agent exited", "task", t.ID, "sandbox", t.SandboxID, "exit_code", code, "status", to)
	}
	return ok
}

// drain stores whatever the guest still holds after seq after.
func (s *Service) drain(ctx context.Context, t *store.Task, after int64) {
	for range 100 {
		var evs []guest.AgentEvent
		err := s.sbx.Client(ctx, t.TenantID, t.SandboxID, func(c *guest.Client) error {
			var err error
			evs, err = c.PullAgentEvents(ctx, after, 0)
			return err
		})
		if err != nil || len(evs) == 0 {
			return // an empty pull with after=N acknowledged N
		}
		if err := s.relay(ctx, t.SandboxID, evs); err != nil {
			return
		}
		after = evs[len(evs)-1].Seq
	}
}
