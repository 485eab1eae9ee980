package crashtest

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/session"
)

// lastUserText is the last text of the request's last user message, or
// "" when it ends with tool results.
func lastUserText(r anthropictest.Request) string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role != "user" {
			continue
		}
		text := ""
		for _, b := range r.Blocks(i) {
			if b.Type == "text" {
				text = b.Text
			}
		}
		return text
	}
	return ""
}

func hasToolResult(r anthropictest.Request) bool {
	for _, b := range r.AllBlocks() {
		if b.Type == "tool_result" {
			return true
		}
	}
	return false
}

func prefilled(r anthropictest.Request) string {
	n := len(r.Messages)
	if n == 0 || r.Messages[n-1].Role != "assistant" {
		return ""
	}
	var s string
	for _, b := range r.Blocks(n - 1) {
		s += b.Text
	}
	return s
}

// TestCrashMidModelStream: the daemon dies after the first text block of
// a response was delivered. After the restart the client sees one
// coherent answer (the delivered block once, the rest after it), the
// request went on from the partial output as prefill, the tool the
// response asked for ran once, session.status_rescheduled marks the cut,
// and an SSE client that reconnected across the restart with its last
// event id saw every event exactly once.
func TestCrashMidModelStream(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			if hasToolResult(r) {
				return anthropictest.Turn{Text: "All done."}
			}
			// Also when prefilled: a model that repeats itself must not
			// make the client see "Part one." twice.
			return anthropictest.Turn{Text: "Part one.", ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo x >> /workspace/log; wc -l < /workspace/log"}}}}
		})
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newSession(t, c)
		var cur atomic.Pointer[[2]string]
		cur.Store(&[2]string{n.url(), n.key})
		sse := followSSE(func() (string, string) { p := cur.Load(); return p[0], p[1] }, sid)
		defer close(sse.stop)
		<-sse.connected

		n.arm(session.FailMidModelStream)
		send(t, c, sid, "go")
		n.waitReached(session.FailMidModelStream)
		// The daemon waits at the failpoint: let the stream deliver what is
		// stored so far, so the client has a Last-Event-ID to resume from
		// (a client that saw nothing has nothing to resume after, and
		// whether the kill beats the first write would be up to the
		// scheduler).
		before := sse.until(len(events(t, c, sid)), 30*time.Second)
		n.kill()
		n.disarm(session.FailMidModelStream)
		n.start()
		cur.Store(&[2]string{n.url(), n.key})
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		checkTrajectory(t, evs)

		var texts []string
		for _, e := range ofType(evs, "agent.message") {
			texts = append(texts, e.text())
		}
		if !slices.Equal(texts, []string{"Part one.", "All done."}) {
			t.Fatalf("agent messages %q, want one coherent answer [Part one. All done.]", texts)
		}
		if len(ofType(evs, "session.status_rescheduled")) != 1 {
			t.Fatalf("want one session.status_rescheduled: %v", types(evs))
		}
		results := ofType(evs, "agent.tool_result")
		if len(results) != 1 || strings.TrimSpace(results[0].text()) != "1" {
			t.Fatalf("the tool ran %d times / result %v", len(results), results)
		}
		sawPrefill := false
		for _, r := range fake.Requests() {
			if prefilled(r) == "Part one." {
				sawPrefill = true
			}
		}
		if !sawPrefill {
			t.Fatal("the recovered request did not continue from the partial output (no assistant prefill)")
		}
		// The SSE client: the stream it stitched across the restart is
		// the session's event list, nothing missing, nothing twice.
		want := make([]string, len(evs))
		for i, e := range evs {
			want[i] = e.ID
		}
		got := append(before, sse.until(len(want)-len(before), 30*time.Second)...)
		if !slices.Equal(got, want) {
			t.Fatalf("SSE across the restart saw %d events, the session has %d:\n got %v\nwant %v", len(got), len(want), got, want)
		}
	})
}

// TestCrashBetweenToolUseAndResult: the daemon dies between agent.tool_use
// and agent.tool_result of `echo x >> /workspace/log`, before the guest
// was asked and after it ran the command. After recovery the line is in
// the log exactly once.
func TestCrashBetweenToolUseAndResult(t *testing.T) {
	for _, fp := range []string{session.FailBeforeToolExec, session.FailAfterToolExec} {
		t.Run(fp, func(t *testing.T) {
			engines(t, func(t *testing.T, engine string) {
				fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
					switch {
					case hasToolResult(r) && lastUserText(r) == "":
						return anthropictest.Turn{Text: "Done."}
					case lastUserText(r) == "count":
						return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "cat /workspace/log"}}}}
					}
					return anthropictest.Turn{Text: "Appending.", ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo x >> /workspace/log"}}}}
				})
				n := newNode(t, engine, fake.URL)
				n.start()
				c := n.client()
				sid := newSession(t, c)
				n.arm(fp)
				send(t, c, sid, "append")
				n.waitReached(fp)
				n.kill()
				n.disarm(fp)
				n.start()
				c = n.client()
				evs := waitIdle(t, n, c, sid, 1)
				checkTrajectory(t, evs)
				if len(ofType(evs, "session.status_rescheduled")) != 1 || len(ofType(evs, "agent.tool_use")) != 1 {
					t.Fatalf("trajectory %v", types(evs))
				}
				send(t, c, sid, "count")
				evs = waitIdle(t, n, c, sid, 2)
				results := ofType(evs, "agent.tool_result")
				if got := results[len(results)-1].text(); strings.Count(got, "x") != 1 {
					t.Fatalf("/workspace/log is %q after recovery, want the line exactly once", got)
				}
			})
		})
	}
}

// TestCrashWithQueuedMessage: a second user.message arrives while the
// first turn hangs; the daemon dies. Both are answered, in order.
func TestCrashWithQueuedMessage(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			return anthropictest.Turn{Text: "answer to " + lastUserText(r)}
		})
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newSession(t, c)
		n.arm(session.FailBeforeModelRequest)
		send(t, c, sid, "first")
		n.waitReached(session.FailBeforeModelRequest)
		send(t, c, sid, "second")
		n.kill()
		n.disarm(session.FailBeforeModelRequest)
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, sid, 2)
		checkTrajectory(t, evs)
		var texts []string
		for _, e := range ofType(evs, "agent.message") {
			texts = append(texts, e.text())
		}
		if !slices.Equal(texts, []string{"answer to first", "answer to second"}) {
			t.Fatalf("answers %q, want both in order", texts)
		}
	})
}

// TestCrashBeforeAnyOutput: the daemon dies right after the run row was
// written, before anything else of the turn. The user's message is still
// answered.
func TestCrashBeforeAnyOutput(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			return anthropictest.Turn{Text: "answer to " + lastUserText(r)}
		})
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newSession(t, c)
		n.arm(session.FailAfterRunRow)
		send(t, c, sid, "hello")
		n.waitReached(session.FailAfterRunRow)
		n.kill()
		n.disarm(session.FailAfterRunRow)
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		checkTrajectory(t, evs)
		msgs := ofType(evs, "agent.message")
		if len(msgs) != 1 || msgs[0].text() != "answer to hello" {
			t.Fatalf("the message was not answered: %v", types(evs))
		}
		if len(ofType(evs, "session.status_running")) != 1 || len(ofType(evs, "session.status_rescheduled")) != 1 {
			t.Fatalf("trajectory %v", types(evs))
		}
	})
}

// TestSixCrashesInOneTurn: the turn dies at the same point every time.
// After the initial attempt and five recoveries without progress, the
// sixth recovery forces the session idle with session.error and stop
// reason retries_exhausted; no further attempt is made, and the session
// answers the next message.
func TestSixCrashesInOneTurn(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		var armed atomic.Bool
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			if armed.Load() {
				return anthropictest.Turn{Text: "should not be asked"}
			}
			return anthropictest.Turn{Text: "answer to " + lastUserText(r)}
		})
		armed.Store(true)
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newSession(t, c)
		n.arm(session.FailBeforeModelRequest)
		send(t, c, sid, "doomed")
		for i := 0; i < 6; i++ {
			n.waitReached(session.FailBeforeModelRequest)
			n.kill()
			n.arm(session.FailBeforeModelRequest)
			n.start()
		}
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		checkTrajectory(t, evs)
		if got := len(ofType(evs, "session.status_rescheduled")); got != 5 {
			t.Fatalf("want 5 recoveries before giving up, got %d: %v", got, types(evs))
		}
		errs := ofType(evs, "session.error")
		if len(errs) != 1 || !strings.Contains(errs[0].Raw, `"exhausted"`) {
			t.Fatalf("session.error: %v", errs)
		}
		idle := ofType(evs, "session.status_idle")
		if !strings.Contains(idle[0].Raw, `"retries_exhausted"`) {
			t.Fatalf("idle stop reason: %s", idle[0].Raw)
		}
		if len(fake.Requests()) != 0 {
			t.Fatalf("the model was asked %d times", len(fake.Requests()))
		}
		// No loop: the session is usable again and answers the next message.
		n.disarm(session.FailBeforeModelRequest)
		armed.Store(false)
		send(t, c, sid, "again")
		evs = waitIdle(t, n, c, sid, 2)
		if msgs := ofType(evs, "agent.message"); len(msgs) != 1 || msgs[0].text() != "answer to again" {
			t.Fatalf("after retries_exhausted: %v", types(evs))
		}
	})
}

// TestCrashStress: many sessions are mid-turn (their model streams hang)
// when the daemon is SIGKILLed; after the restart every one reaches idle
// with a complete trajectory and its own answer.
func TestCrashStress(t *testing.T) {
	const sessions = 30
	engines(t, func(t *testing.T, engine string) {
		var hang atomic.Bool
		hang.Store(true)
		// The hanging answer streams its first half; the turn recovered
		// continues it from what was saved of it (a prefill), if anything.
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			answer := "answer to " + lastUserText(r)
			if hang.Load() {
				return anthropictest.Turn{Text: answer, Hang: true}
			}
			rest, ok := strings.CutPrefix(answer, prefilled(r))
			if !ok {
				rest = "(the prefill " + prefilled(r) + " does not begin " + answer + ")"
			}
			return anthropictest.Turn{Text: rest}
		})
		var hanging atomic.Int64
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-fake.Hanging:
					hanging.Add(1)
				case <-done:
					return
				}
			}
		}()
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sids := make([]string, sessions)
		for i := range sids {
			sids[i] = newSession(t, c)
			send(t, c, sids[i], fmt.Sprintf("q%d", i))
		}
		for deadline := time.Now().Add(2 * time.Minute); hanging.Load() < sessions; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d turns reached the model\n%s", hanging.Load(), sessions, n.logs())
			}
		}
		n.kill()
		hang.Store(false)
		n.start()
		c = n.client()
		for i, sid := range sids {
			evs := waitIdle(t, n, c, sid, 1)
			checkTrajectory(t, evs)
			msgs := ofType(evs, "agent.message")
			if len(msgs) != 1 || msgs[0].text() != fmt.Sprintf("answer to q%d", i) {
				t.Fatalf("session %d: %v", i, types(evs))
			}
			want := []string{"user.message", "session.status_running", "span.model_request_start", "session.status_rescheduled",
				"agent.message", "span.model_request_end", "session.status_idle"}
			if !slices.Equal(types(evs), want) {
				t.Fatalf("session %d trajectory %v, want %v", i, types(evs), want)
			}
		}
	})
}

// TestProgressResetsTheRecoveryCount: the daemon dies eight times in one
// turn — more than the five recoveries a turn that makes no progress gets
// — each time after the next step's tool call is journalled and before the
// guest is asked. Every recovery gets further: it runs the call the guest
// never accepted (its result is new progress) and the next step's model
// call, and dies at the next tool. So the count starts again each time:
// the turn completes, every command ran exactly once, and no
// retries_exhausted.
func TestProgressResetsTheRecoveryCount(t *testing.T) {
	const kills = 7
	engines(t, func(t *testing.T, engine string) {
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			step := 0
			for _, b := range r.AllBlocks() {
				if b.Type == "tool_result" {
					step++
				}
			}
			if step < kills {
				return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash",
					Input: map[string]any{"command": fmt.Sprintf("echo %d >> /workspace/log", step)}}}}
			}
			if step == kills {
				return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "cat /workspace/log"}}}}
			}
			return anthropictest.Turn{Text: "Done."}
		})
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newSession(t, c)
		n.arm(session.FailBeforeToolExec)
		send(t, c, sid, "count")
		for range kills {
			n.waitReached(session.FailBeforeToolExec)
			n.kill()
			n.arm(session.FailBeforeToolExec)
			n.start()
		}
		n.waitReached(session.FailBeforeToolExec) // the last step's cat
		n.kill()
		n.disarm(session.FailBeforeToolExec)
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, sid, 1)
		checkTrajectory(t, evs)
		if got := len(ofType(evs, "session.status_rescheduled")); got != kills+1 {
			t.Fatalf("%d recoveries, want %d: %v", got, kills+1, types(evs))
		}
		if errs := ofType(evs, "session.error"); len(errs) != 0 {
			t.Fatalf("session.error after recoveries that made progress: %v", errs)
		}
		results := ofType(evs, "agent.tool_result")
		var want []string
		for i := range kills {
			want = append(want, fmt.Sprint(i))
		}
		if got := strings.TrimSpace(results[len(results)-1].text()); got != strings.Join(want, "\n") {
			t.Fatalf("/workspace/log after %d kills is %q, want each command once", kills, got)
		}
	})
}

// TestCrashAfterBatchClaim: many turns are orphaned, and the boot that
// recovers them dies right after its sweep claimed them all in one batch,
// before any was resumed. The next boot claims them from it and resumes
// each exactly once: one status_rescheduled, one answer, per session.
func TestCrashAfterBatchClaim(t *testing.T) {
	const sessions = 20
	engines(t, func(t *testing.T, engine string) {
		var hang atomic.Bool
		hang.Store(true)
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			answer := "answer to " + lastUserText(r)
			if hang.Load() {
				return anthropictest.Turn{Text: answer, Hang: true}
			}
			rest, ok := strings.CutPrefix(answer, prefilled(r))
			if !ok {
				rest = "(the prefill " + prefilled(r) + " does not begin " + answer + ")"
			}
			return anthropictest.Turn{Text: rest}
		})
		var hanging atomic.Int64
		done := make(chan struct{})
		defer close(done)
		go func() {
			for {
				select {
				case <-fake.Hanging:
					hanging.Add(1)
				case <-done:
					return
				}
			}
		}()
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sids := make([]string, sessions)
		for i := range sids {
			sids[i] = newSession(t, c)
			send(t, c, sids[i], fmt.Sprintf("q%d", i))
		}
		for deadline := time.Now().Add(2 * time.Minute); hanging.Load() < sessions; time.Sleep(20 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("only %d of %d turns reached the model\n%s", hanging.Load(), sessions, n.logs())
			}
		}
		n.kill()
		// The second boot claims every orphan and dies before resuming any.
		n.arm(session.FailAfterClaim)
		n.start()
		n.waitReached(session.FailAfterClaim)
		n.kill()
		n.disarm(session.FailAfterClaim)
		hang.Store(false)
		n.start()
		c = n.client()
		for i, sid := range sids {
			evs := waitIdle(t, n, c, sid, 1)
			checkTrajectory(t, evs)
			want := []string{"user.message", "session.status_running", "span.model_request_start", "session.status_rescheduled",
				"agent.message", "span.model_request_end", "session.status_idle"}
			if !slices.Equal(types(evs), want) {
				t.Fatalf("session %d trajectory %v, want %v (resumed exactly once)", i, types(evs), want)
			}
			if msgs := ofType(evs, "agent.message"); msgs[0].text() != fmt.Sprintf("answer to q%d", i) {
				t.Fatalf("session %d answered %q", i, msgs[0].text())
			}
		}
	})
}
