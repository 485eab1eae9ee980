package session

import "strings"

// Multi-agent threads (issue 14). A session whose agent names a
// coordinator roster (multiagent) can open threads with the roster's
// agents. A thread is a session of its own (store.ManagedSession with
// ThreadOf set to its parent): its own event log, turns, run rows and op
// journal, so it inherits their crash safety; it shares its parent's
// sandbox. The parent's log is the primary thread: it carries the
// coordinator's trajectory and a condensed view of its threads (their
// status transitions and the messages between them).

// Thread event types (anthropic-sdk-go's BetaManagedAgents*Event).
const (
	EventThreadCreated           = "session.thread_created"
	EventThreadStatusRunning     = "session.thread_status_running"
	EventThreadStatusIdle        = "session.thread_status_idle"
	EventThreadStatusRescheduled = "session.thread_status_rescheduled"
	EventThreadStatusTerminated  = "session.thread_status_terminated"
	EventThreadMessageSent       = "agent.thread_message_sent"
	EventThreadMessageReceived   = "agent.thread_message_received"
)

// ThreadPrefix starts every thread id.
const ThreadPrefix = "sthr_"

// PrimaryThreadID is the id of a session's primary thread: the session's
// own id with the thread prefix (so it needs no row and no lookup).
func PrimaryThreadID(sessionID string) string {
	return ThreadPrefix + strings.TrimPrefix(sessionID, "sesn_")
}

// SessionOfPrimaryThread is the session a primary thread id names ("" when
// id is not one of the shape PrimaryThreadID makes).
func SessionOfPrimaryThread(id string) string {
	if !strings.HasPrefix(id, ThreadPrefix) {
		return ""
	}
	return "sesn_" + strings.TrimPrefix(id, ThreadPrefix)
}
