package store

// The agent event types of seed 001, exactly as it lists them. The store,
// the API and the monitor share these so "work" means one thing everywhere.

// Work events: they indicate actual progress.
const (
	EventFileEdited        = "agent.file_edited"
	EventToolCompleted     = "agent.tool_completed"
	EventSubagentCompleted = "agent.subagent_completed"
	EventSkillCompleted    = "agent.skill_completed"
	// EventCompleted is terminal: the agent finished its entire task. It is
	// also a work event (the seed lists it as one).
	EventCompleted        = "agent.completed"
	EventAssistantMessage = "agent.assistant_message"
	EventToolUse          = "agent.tool_use"
	EventToolResult       = "agent.tool_result"
)

// Non-work events: they do not indicate progress.
const (
	// EventHeartbeat says the agent is alive; it carries a HeartbeatStatus.
	EventHeartbeat = "agent.heartbeat"
	EventStarted   = "agent.started"
	EventThinking  = "agent.thinking"
	EventError     = "agent.error"
)

// WorkEventTypes returns the seed's work event types (a fresh slice).
func WorkEventTypes() []string {
	return []string{
		EventFileEdited, EventToolCompleted, EventSubagentCompleted, EventSkillCompleted,
		EventCompleted, EventAssistantMessage, EventToolUse, EventToolResult,
	}
}

// NonWorkEventTypes returns the seed's non-work event types (a fresh slice).
func NonWorkEventTypes() []string {
	return []string{EventHeartbeat, EventStarted, EventThinking, EventError}
}

// IsWorkEvent reports whether typ is a work event.
func IsWorkEvent(typ string) bool {
	switch typ {
	case EventFileEdited, EventToolCompleted, EventSubagentCompleted, EventSkillCompleted,
		EventCompleted, EventAssistantMessage, EventToolUse, EventToolResult:
		return true
	}
	return false
}

// IsAgentEventType reports whether typ is a known agent event type (work or
// non-work); anything else is rejected.
func IsAgentEventType(typ string) bool {
	switch typ {
	case EventHeartbeat, EventStarted, EventThinking, EventError:
		return true
	}
	return IsWorkEvent(typ)
}
