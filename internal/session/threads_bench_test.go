package session_test

import (
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/session"
)

// BenchmarkThreadOpenVsToolCall measures, in one run and on the same
// daemon (SQLite, process sandboxes, scripted models), what opening a
// thread costs next to a bash tool call: per session, a coordinator opens
// one thread whose worker runs one bash call (after a bash call of its
// own, so the sandbox exists before the thread is opened). From the events' processed_at
// it takes the create_thread call (agent.tool_use → agent.tool_result:
// the journalled op, the thread's session and task in one transaction,
// session.thread_created and agent.thread_message_sent), the worker's
// bash call (agent.tool_use → agent.tool_result: the journalled op and the
// command in the shared sandbox), and the answer's way back (the thread's
// session.status_idle → the coordinator's agent.thread_message_received).
//
//	go test -run '^$' -bench ThreadOpenVsToolCall -benchtime 30x -count 3 ./internal/session/
func BenchmarkThreadOpenVsToolCall(b *testing.B) {
	e := startThreads(b)
	var open, bash, back time.Duration
	for i := 0; i < b.N; i++ {
		sid := e.coordinator(b, "bench-coord", "bench-worker")
		e.say(b, sid, "go")
		evs := e.waitFor(b, sid, "session.status_idle", 1)
		tid := ""
		for _, ev := range evs {
			if ev.Type == session.EventThreadCreated {
				tid = ev.SessionThreadID
			}
		}
		tevs := e.log(b, sid, tid)
		open += toolSpan(evs, session.ToolCreateThread)
		bash += toolSpan(tevs, "bash")
		back += at(evs, session.EventThreadMessageReceived).Sub(at(tevs, "session.status_idle"))
	}
	n := float64(b.N)
	b.ReportMetric(float64(open.Microseconds())/n, "open-µs")
	b.ReportMetric(float64(bash.Microseconds())/n, "bash-µs")
	b.ReportMetric(float64(open)/float64(bash), "open/bash")
	b.ReportMetric(float64(back.Microseconds())/n, "answer-back-µs")
}

func at(evs []anthropic.BetaManagedAgentsSessionEventUnion, typ string) time.Time {
	for _, ev := range evs {
		if ev.Type == typ {
			return ev.ProcessedAt
		}
	}
	return time.Time{}
}

// toolSpan is the time from the agent.tool_use of the tool named name to
// its agent.tool_result.
func toolSpan(evs []anthropic.BetaManagedAgentsSessionEventUnion, name string) time.Duration {
	use := ""
	var from time.Time
	for _, ev := range evs {
		switch {
		case ev.Type == "agent.tool_use" && ev.Name == name:
			use, from = ev.ID, ev.ProcessedAt
		case ev.Type == "agent.tool_result" && use != "" && ev.ToolUseID == use:
			return ev.ProcessedAt.Sub(from)
		}
	}
	return 0
}
