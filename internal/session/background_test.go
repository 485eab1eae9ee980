package session

import (
	"context"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/store"
)

// TestBackgroundTaskOfATerminatedSessionIsNotReported: a session is
// destroyed while its background command runs. The next poll finishes the
// task (its sandbox is gone, and so is the process) instead of polling it
// until the cap, and appends no report to the terminated session.
func TestBackgroundTaskOfATerminatedSessionIsNotReported(t *testing.T) {
	e := newRTEnv(t, func(r anthropictest.Request) turn {
		if r.AssistantTurns() == 0 {
			return turn{ToolUses: []tu{{Name: "bash", Input: map[string]any{"command": "sleep 1000", "run_in_background": true}}}}
		}
		return turn{Text: "started"}
	}, true, func(c *RuntimeConfig) { c.BackgroundPoll = time.Hour }) // only the test polls
	ctx := context.Background()
	s := e.session(t, "claude-test", "")
	st := e.follow(t, s.ID)
	e.say(t, s.ID, "start it")
	st.untilType(EventStatusIdle)
	tasks, err := e.st.ListBackgroundTasks(ctx, s.ID, TaskRunning)
	if err != nil || len(tasks) != 1 {
		t.Fatalf("running tasks %v, %v: want the one", tasks, err)
	}
	if err := e.rt.Destroy(ctx, "t1", s.ID); err != nil {
		t.Fatal(err)
	}
	if err := e.rt.PollBackground(ctx); err != nil {
		t.Fatal(err)
	}
	task, err := e.st.GetBackgroundTask(ctx, tasks[0].ID)
	if err != nil || task.Status != TaskKilled {
		t.Fatalf("task after the poll: %+v, %v: want killed", task, err)
	}
	evs, err := e.st.ListEvents(ctx, store.ListEventsParams{SessionID: s.ID, Types: []string{EventUserMessage}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("%d user messages (%v): want only the one the test sent", len(evs), err)
	}
}
