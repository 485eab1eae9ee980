package session

import (
	"context"
	"errors"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/agentkernel/agentkernel/internal/store"
)

// A background task's end reaches the model as a user.message (seed 003):
// stored like one the API accepts, so an idle session starts a turn on it
// and one that arrives during a turn is taken by the next turn, as any
// message sent mid-turn is.

// reportCommandChars bounds how much of the command the report quotes.
const reportCommandChars = 200

// reportEventID is the id of a task's report: derived from the task, so
// the store refuses a second one (a poll repeated after a crash).
func reportEventID(taskID string) string { return "sevt_" + taskID }

// reportText says how the task ended; ran is how long it ran when it
// exited on its own.
func reportText(t *store.BackgroundTask, ran time.Duration) string {
	cmd := t.Command
	if utf8.RuneCountInString(cmd) > reportCommandChars {
		cmd = string([]rune(cmd)[:reportCommandChars]) + "…"
	}
	var how string
	switch t.Status {
	case TaskExited:
		how = fmt.Sprintf("ended without an exit code (killed by a signal) after %s", ran.Round(time.Second))
		if t.ExitCode != nil {
			how = fmt.Sprintf("exited with code %d after %s", *t.ExitCode, ran.Round(time.Second))
		}
	case TaskExpired:
		// Rounded: stored times may lose precision below a millisecond.
		how = fmt.Sprintf("was killed at the %s cap", t.Deadline.Sub(t.StartedAt).Round(time.Millisecond))
	default:
		how = "was lost: its sandbox restarted"
	}
	return fmt.Sprintf("[background task %s (command: %s) %s]", t.ID, cmd, how)
}

// reportTask appends the task's report to its session and wakes the
// session. A report already stored is success: it was appended before a
// crash, or by an earlier poll whose task update failed.
func (r *Runtime) reportTask(ctx context.Context, t *store.BackgroundTask, ran time.Duration) error {
	ev := newEvent(EventUserMessage, map[string]any{"content": textContent(reportText(t, ran))})
	ev.ID = reportEventID(t.ID)
	if _, err := r.cfg.Events.Append(ctx, t.SessionID, []store.NewEvent{ev}); err != nil && !errors.Is(err, store.ErrAlreadyExists) {
		return err
	}
	r.Wake(t.SessionID)
	return nil
}
