package session

import (
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestIdleWorkersParkWithinABound: a worker whose queue is empty keeps no
// goroutine, and at most MaxParkedWorkers idle workers keep their folded
// conversation; a session whose worker was dropped answers its next
// message all the same.
func TestIdleWorkersParkWithinABound(t *testing.T) {
	e := newRTEnv(t, func(r anthropictest.Request) anthropictest.Turn {
		return turn{Text: "ok"}
	}, false, func(c *RuntimeConfig) { c.MaxParkedWorkers = 2 })
	var ids []string
	for range 4 {
		s := e.session(t, "claude-test", `[]`)
		st := e.follow(t, s.ID)
		e.say(t, s.ID, "hi")
		st.untilType(EventStatusIdle)
		ids = append(ids, s.ID)
	}
	parked := func() (workers, running int) {
		e.rt.mu.Lock()
		defer e.rt.mu.Unlock()
		for _, w := range e.rt.workers {
			if w.running {
				running++
			}
		}
		return len(e.rt.workers), running
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		workers, running := parked()
		if running == 0 && workers <= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d workers (%d running) after every turn ended, want at most 2 parked", workers, running)
		}
		time.Sleep(10 * time.Millisecond)
	}
	st := e.follow(t, ids[0])
	e.say(t, ids[0], "again")
	st.untilType(EventStatusIdle)
	st.untilType(EventStatusIdle)
}
