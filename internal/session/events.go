package session

import (
	"encoding/json"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Event types of the Managed Agents API (anthropic-sdk-go's
// BetaManagedAgents*Event types).
const (
	EventUserMessage          = "user.message"
	EventUserInterrupt        = "user.interrupt"
	EventUserCustomToolResult = "user.custom_tool_result"
	EventUserToolResult       = "user.tool_result"
	EventUserToolConfirmation = "user.tool_confirmation"
	EventAgentMessage         = "agent.message"
	EventAgentThinking        = "agent.thinking"
	EventAgentToolUse         = "agent.tool_use"
	EventAgentToolResult      = "agent.tool_result"
	EventAgentCustomToolUse   = "agent.custom_tool_use"
	EventAgentMCPToolUse      = "agent.mcp_tool_use"
	EventAgentMCPToolResult   = "agent.mcp_tool_result"
	EventStatusRunning        = "session.status_running"
	EventStatusIdle           = "session.status_idle"
	EventStatusRescheduled    = "session.status_rescheduled"
	EventStatusTerminated     = "session.status_terminated"
	EventSessionError         = "session.error"
	EventSpanModelStart       = "span.model_request_start"
	EventSpanModelEnd         = "span.model_request_end"
	// EventThreadContextCompacted: the conversation sent to the model was
	// compacted (see turn_compact.go); the events it replaced stay in the
	// log.
	EventThreadContextCompacted = "agent.thread_context_compacted"
)

// Stop reasons of session.status_idle.
const (
	StopEndTurn        = "end_turn"
	StopRequiresAction = "requires_action"
	StopRefusal        = "refusal"
)

// userEventTypes are the events the runtime's queue holds.
var userEventTypes = []string{EventUserMessage, EventUserInterrupt, EventUserCustomToolResult, EventUserToolResult, EventUserToolConfirmation, EventUserDefineOutcome}

func newEvent(typ string, body map[string]any) store.NewEvent {
	if body == nil {
		body = map[string]any{}
	}
	body["type"] = typ
	raw, _ := json.Marshal(body)
	return store.NewEvent{ID: ids.New("sevt"), Type: typ, Data: raw}
}

func textContent(s string) []map[string]any {
	return []map[string]any{{"type": "text", "text": s}}
}

func stopReason(typ string, eventIDs []string) map[string]any {
	sr := map[string]any{"type": typ}
	if typ == StopRequiresAction {
		sr["event_ids"] = eventIDs
	}
	return sr
}

// idleEvent is session.status_idle. stop_details is null unless there is
// more to report than the stop reason: a refusal carries its details
// (category and explanation null: the providers give neither).
func idleEvent(sr map[string]any) store.NewEvent {
	var details any
	if sr["type"] == StopRefusal {
		details = map[string]any{"type": "refusal", "category": nil, "explanation": nil}
	}
	return newEvent(EventStatusIdle, map[string]any{"stop_reason": sr, "stop_details": details})
}

// errorEvent is session.error; kind is the SDK's error type
// (model_request_failed_error, unknown_error, …).
func errorEvent(kind, message string) store.NewEvent {
	return newEvent(EventSessionError, map[string]any{"error": map[string]any{
		"type": kind, "message": message, "retry_status": map[string]any{"type": "terminal"},
	}})
}

func usageJSON(u model.Usage) map[string]any {
	return map[string]any{
		"input_tokens":                u.InputTokens,
		"output_tokens":               u.OutputTokens,
		"cache_creation_input_tokens": u.CacheCreationInputTokens,
		"cache_read_input_tokens":     u.CacheReadInputTokens,
	}
}

// sessionUsage is the session's cumulative usage in the SDK's shape
// (BetaManagedAgentsSessionUsage).
type sessionUsage struct {
	InputTokens          int64 `json:"input_tokens"`
	OutputTokens         int64 `json:"output_tokens"`
	CacheReadInputTokens int64 `json:"cache_read_input_tokens"`
	CacheCreation        struct {
		Ephemeral1h int64 `json:"ephemeral_1h_input_tokens"`
		Ephemeral5m int64 `json:"ephemeral_5m_input_tokens"`
	} `json:"cache_creation"`
}

func addUsage(raw json.RawMessage, u model.Usage) json.RawMessage {
	var su sessionUsage
	if len(raw) > 0 {
		_ = json.Unmarshal(raw, &su)
	}
	su.InputTokens += u.InputTokens
	su.OutputTokens += u.OutputTokens
	su.CacheReadInputTokens += u.CacheReadInputTokens
	su.CacheCreation.Ephemeral5m += u.CacheCreationInputTokens
	out, _ := json.Marshal(su)
	return out
}
