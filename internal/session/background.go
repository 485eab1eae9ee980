package session

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/tools"
)

// Background tasks (seed 003): a bash call with run_in_background starts a
// process in the guest and answers at once. The task is a row in the
// store, so it outlives a restart; the runtime polls running tasks until
// they exit, and kills them at the cap (RuntimeConfig.BackgroundCap, 30m
// by default). When a task ends the model is told (background_report.go).
// While the process runs the sandbox layer keeps the sandbox awake (it
// does so for any running guest process younger than its background cap).

// Background task statuses.
const (
	TaskRunning = "running"
	TaskExited  = "exited"
	TaskKilled  = "killed"
	TaskExpired = "expired"
)

// taskID is the task's id: derived from the session and the op id, so the
// task of a replayed call is the same task. The op id alone is not enough:
// it names the call by its position in the session, and task ids are
// global, so two sessions making the same call would share one task.
func taskID(sessionID, opID string) string {
	h := sha256.Sum256([]byte(sessionID + "/" + opID))
	return "bgtask_" + hex.EncodeToString(h[:12])
}

func backgroundResult(t *store.BackgroundTask) *guest.ToolResult {
	return &guest.ToolResult{Content: fmt.Sprintf(
		"Started background task %s (process %s). It runs for at most %s. When it ends you get a message with its exit code; its output is not returned, so have it write to a file in the workspace if you need it.",
		t.ID, t.ProcessID, t.Deadline.Sub(t.StartedAt))}
}

// startBackground starts the command and records its task.
func (w *worker) startBackground(ctx context.Context, ts *turnState, sbID, opID, command string, env map[string]string) (*guest.ToolResult, error) {
	info, err := tools.StartBackground(ctx, w.r.cfg.Sandboxes, ts.s.TenantID, sbID, opID, command, env, w.r.cfg.BackgroundCap)
	if err != nil {
		return nil, err
	}
	return w.recordBackground(ctx, sbID, opID, command, info)
}

// recoverBackground decides a background start the journal shows started
// and not completed: a recorded task or a process carrying the op's mark
// means it started; otherwise it is ambiguous (the guest keeps its
// process table only while it lives).
func (w *worker) recoverBackground(ctx context.Context, ts *turnState, sbID, opID, command string) (*guest.ToolResult, error) {
	if t, err := w.r.cfg.Store.GetBackgroundTask(ctx, taskID(w.id, opID)); err == nil {
		return backgroundResult(t), nil
	}
	// A start recorded by a binary that named tasks by the op id alone:
	// the same task, not a second one to report.
	if t, err := w.r.cfg.Store.GetBackgroundTask(ctx, "bgtask_"+opID[len("op_"):len("op_")+24]); err == nil && t.SessionID == w.id {
		return backgroundResult(t), nil
	}
	info, err := tools.FindBackground(ctx, w.r.cfg.Sandboxes, ts.s.TenantID, sbID, opID)
	if err != nil {
		return nil, err
	}
	if info == nil {
		return ambiguousResult(opID), nil
	}
	return w.recordBackground(ctx, sbID, opID, command, info)
}

func (w *worker) recordBackground(ctx context.Context, sbID, opID, command string, info *guest.ProcessInfo) (*guest.ToolResult, error) {
	now := w.r.cfg.Clock.Now()
	t, err := w.r.cfg.Store.CreateBackgroundTask(context.WithoutCancel(ctx), &store.BackgroundTask{
		ID: taskID(w.id, opID), SessionID: w.id, SandboxID: sbID, ProcessID: info.ID, Command: command,
		Status: TaskRunning, StartedAt: now, Deadline: now.Add(w.r.cfg.BackgroundCap),
	})
	if errors.Is(err, store.ErrAlreadyExists) {
		t, err = w.r.cfg.Store.GetBackgroundTask(ctx, taskID(w.id, opID))
	}
	if err != nil {
		return nil, fmt.Errorf("record background task: %w", err)
	}
	return backgroundResult(t), nil
}

// pollLoop polls running background tasks every BackgroundPoll.
func (r *Runtime) pollLoop(ctx context.Context) {
	defer r.wg.Done()
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.cfg.Clock.After(r.cfg.BackgroundPoll):
		}
		if err := r.PollBackground(ctx); err != nil && ctx.Err() == nil {
			r.log.WarnContext(ctx, "background task poll", "err", err)
		}
	}
}

// PollBackground updates every running background task: exited ones get
// their exit code, ones past the cap are killed (expired), and ones whose
// process the guest no longer knows (the sandbox restarted) are killed.
// Each end is reported to the model before the task is marked finished.
func (r *Runtime) PollBackground(ctx context.Context) error {
	if r.cfg.Sandboxes == nil {
		return nil
	}
	tasks, err := r.cfg.Store.ListBackgroundTasks(ctx, "", TaskRunning)
	if err != nil {
		return err
	}
	for _, t := range tasks {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		r.pollTask(ctx, t)
	}
	return nil
}

func (r *Runtime) pollTask(ctx context.Context, t *store.BackgroundTask) {
	s, err := r.cfg.Store.GetManagedSession(ctx, t.SessionID)
	if err != nil {
		if errors.Is(err, store.ErrNotFound) {
			t.Status = TaskKilled
			r.saveTask(ctx, t)
		}
		return
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var ran time.Duration
	if now := r.cfg.Clock.Now(); !now.Before(t.Deadline) {
		if err := tools.KillBackground(cctx, r.cfg.Sandboxes, s.TenantID, t.SandboxID, t.ProcessID); err != nil && !guest.IsNotFound(err) && !sandboxGone(err) {
			r.log.WarnContext(ctx, "kill expired background task", "task", t.ID, "err", err)
			return
		}
		t.Status = TaskExpired
	} else {
		info, err := tools.PollBackground(cctx, r.cfg.Sandboxes, s.TenantID, t.SandboxID, t.ProcessID)
		switch {
		case guest.IsNotFound(err), sandboxGone(err):
			t.Status = TaskKilled
		case err != nil:
			return
		case info.Running:
			return
		case info.TimedOut:
			// The guest's own timeout (the same cap) fired first.
			t.Status = TaskExpired
		default:
			t.Status = TaskExited
			if info.ExitCode != nil {
				code := int64(*info.ExitCode)
				t.ExitCode = &code
			}
			ran = now.Sub(t.StartedAt)
			if info.ExitedAt != nil {
				// The guest's times: exact even when the poll comes late
				// (after a restart).
				ran = info.ExitedAt.Sub(info.StartedAt)
			}
		}
	}
	// Reported first, finished second: a crash in between re-polls the
	// task, and the report, whose event id is the task's, is not stored
	// twice.
	if s.TerminatedAt == nil && s.ArchivedAt == nil {
		if err := r.reportTask(ctx, t, ran); err != nil {
			r.log.WarnContext(ctx, "report background task", "task", t.ID, "err", err)
			return
		}
		r.failpoint(FailAfterBackgroundReport)
	}
	r.saveTask(ctx, t)
}

// sandboxGone: the task's sandbox is destroyed, so its process is too.
func sandboxGone(err error) bool {
	return errors.Is(err, sandbox.ErrDestroyed) || errors.Is(err, store.ErrNotFound)
}

func (r *Runtime) saveTask(ctx context.Context, t *store.BackgroundTask) {
	t.UpdatedAt = r.cfg.Clock.Now()
	if _, err := r.cfg.Store.UpdateBackgroundTask(ctx, t); err != nil {
		r.log.WarnContext(ctx, "update background task", "task", t.ID, "err", err)
	}
}
