package console

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// foldOver: a text longer than this many lines (or 4 KiB) is shown
// folded, its first lines visible.
const foldOver = 12

// eventView is a session event as the trajectory shows it.
type eventView struct {
	ID, Type string
	At       time.Time
	// Kind picks the look: user, agent, thinking, tool, result, span,
	// status, cut, error, other.
	Kind string
	// Label is the event's one-line title.
	Label string
	Text  string
	// Tool is the tool's name (tool uses), Input its pretty input.
	Tool, Input string
	// InputFold: Input is long (a file written whole, say): folded as a
	// long Text is, the rest loaded when the fold opens.
	InputFold bool
	IsError   bool
	// Fold: Text is long: the page carries its first lines, and the
	// fold loads the rest when opened (a page of 200 long outputs stays
	// a few hundred KB).
	Fold bool
	// Page is the path of the page of the event's log, below the
	// prefix (/sessions/{id}, or /sessions/{id}/threads/{thread}): the
	// event's JSON is at {Page}/events/{ID}, loaded when its fold opens
	// (inlined, every event's JSON was most of a page's weight).
	Page string
	// Waiting are the event ids a requires_action idle waits on.
	Waiting []string
	// Custom: a custom tool use (the user answers it).
	Custom bool
	// ToolUseID: the call a tool result answers.
	ToolUseID string
}

// viewEvent reads an API event of the log whose page is page.
func viewEvent(page string, raw []byte) eventView {
	var e struct {
		ID          string          `json:"id"`
		Type        string          `json:"type"`
		ProcessedAt time.Time       `json:"processed_at"`
		Content     json.RawMessage `json:"content"`
		Name        string          `json:"name"`
		Input       json.RawMessage `json:"input"`
		IsError     bool            `json:"is_error"`
		Thinking    string          `json:"thinking"`
		Error       *struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
		StopReason *struct {
			Type     string   `json:"type"`
			EventIDs []string `json:"event_ids"`
		} `json:"stop_reason"`
		ModelUsage   *usageJSON `json:"model_usage"`
		ServerName   string     `json:"mcp_server_name"`
		ToolUseID    string     `json:"tool_use_id"`
		MCPToolUseID string     `json:"mcp_tool_use_id"`
	}
	_ = json.Unmarshal(raw, &e)
	v := eventView{ID: e.ID, Type: e.Type, At: e.ProcessedAt, Page: page, Text: contentText(e.Content),
		ToolUseID: e.ToolUseID + e.MCPToolUseID}
	switch e.Type {
	case "user.message":
		v.Kind, v.Label = "user", "User"
	case "user.interrupt":
		v.Kind, v.Label = "status", "Interrupted by the user"
	case "user.tool_confirmation", "user.tool_result", "user.custom_tool_result":
		v.Kind, v.Label = "user", strings.ReplaceAll(strings.TrimPrefix(e.Type, "user."), "_", " ")
	case "agent.message":
		v.Kind, v.Label = "agent", "Agent"
	case "agent.thinking":
		v.Kind, v.Label = "thinking", "Thinking"
		if v.Text == "" {
			v.Text = e.Thinking
		}
	case "agent.tool_use", "agent.mcp_tool_use", "agent.custom_tool_use":
		v.Kind, v.Tool, v.Input = "tool", e.Name, pretty(e.Input)
		v.Label = "Tool call: " + e.Name
		if e.ServerName != "" {
			v.Label = fmt.Sprintf("Tool call: %s (%s)", e.Name, e.ServerName)
		}
		v.Custom = e.Type == "agent.custom_tool_use"
	case "agent.tool_result", "agent.mcp_tool_result":
		v.Kind, v.Label, v.IsError = "result", "Tool result", e.IsError
		if e.IsError {
			v.Label = "Tool result (error)"
		}
	case "session.status_rescheduled":
		v.Kind, v.Label = "cut", "Rescheduled: the daemon went away mid-turn and another run picked the turn up"
	case "session.status_running", "session.status_idle", "session.status_terminated":
		v.Kind, v.Label = "status", strings.TrimPrefix(e.Type, "session.status_")
		if e.StopReason != nil {
			v.Label += " (" + strings.ReplaceAll(e.StopReason.Type, "_", " ") + ")"
			if e.StopReason.Type == "requires_action" {
				v.Waiting = e.StopReason.EventIDs
			}
		}
	case "session.error":
		v.Kind, v.Label = "error", "Error"
		if e.Error != nil {
			v.Text = e.Error.Message
			v.Label = "Error: " + e.Error.Type
		}
	case "span.model_request_start":
		v.Kind, v.Label = "span", "Model request"
	case "span.model_request_end":
		v.Kind, v.Label = "span", "Model answered"
		if e.ModelUsage != nil {
			v.Label = fmt.Sprintf("Model answered: %s in, %s out", tokens(e.ModelUsage.InputTokens), tokens(e.ModelUsage.OutputTokens))
			if e.ModelUsage.CacheReadInputTokens > 0 {
				v.Label += fmt.Sprintf(", %s from cache", tokens(e.ModelUsage.CacheReadInputTokens))
			}
		}
		v.IsError = e.IsError
	default:
		v.Kind, v.Label = "other", e.Type
	}
	v.Fold, v.InputFold = long(v.Text), long(v.Input)
	return v
}

// long: a text to fold, its first lines on the page.
func long(s string) bool { return strings.Count(s, "\n") >= foldOver || len(s) > 4096 }

// contentText joins the text blocks of an event's content (a string is
// taken as is).
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var parts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		default:
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// FirstLines is the folded view of a long text.
func (v eventView) FirstLines() string { return firstLines(v.Text) }

// InputSize is the input's size in bytes, as shown.
func (v eventView) InputSize() int64 { return int64(len(v.Input)) }

// InputFirstLines is the folded view of a long input.
func (v eventView) InputFirstLines() string { return firstLines(v.Input) }

// firstLines is the first lines of text, at most 4 KiB (cut between
// characters).
func firstLines(text string) string {
	lines := strings.SplitN(text, "\n", foldOver+1)
	if len(lines) > foldOver {
		lines = lines[:foldOver]
	}
	s := strings.Join(lines, "\n")
	if len(s) > 4096 {
		s = s[:4096]
		for len(s) > 0 && !utf8.RuneStart(text[len(s)]) {
			s = s[:len(s)-1]
		}
	}
	return s
}
