package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Limits of the people view; --json prints events whole.
const (
	renderMaxLines = 20
	renderMaxChars = 2000
	renderMaxInput = 400
)

// wireEvent is the part of a Managed Agents session event the people view
// shows. It is decoded from the raw JSON because the SDK has one union
// type for listed events and another for streamed ones.
type wireEvent struct {
	ID          string          `json:"id"`
	Type        string          `json:"type"`
	ProcessedAt time.Time       `json:"processed_at"`
	Content     []wireBlock     `json:"content"`
	Name        string          `json:"name"`
	Input       json.RawMessage `json:"input"`
	ToolUseID   string          `json:"tool_use_id"`
	CustomUseID string          `json:"custom_tool_use_id"`
	IsError     bool            `json:"is_error"`
	Result      json.RawMessage `json:"result"`
	DenyMessage string          `json:"deny_message"`
	// user.define_outcome and span.outcome_evaluation_end.
	Description string `json:"description"`
	Explanation string `json:"explanation"`
	Iteration   int64  `json:"iteration"`
	Error       struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	StopReason struct {
		Type     string   `json:"type"`
		EventIDs []string `json:"event_ids"`
	} `json:"stop_reason"`
	// agent.thread_context_compacted
	Strategy string `json:"strategy"`
	Replaced struct {
		Messages int `json:"messages"`
	} `json:"replaced"`
	TokensBefore int64 `json:"input_tokens_before"`
	TokensAfter  int64 `json:"input_tokens_after"`
}

type wireBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// renderer writes a session's trajectory for people: one line per event,
// or a block indented under its label when the text has several lines.
type renderer struct {
	w io.Writer
	// tools maps a tool_use event id to its tool name, so a result can say
	// which tool it answers.
	tools map[string]string
}

func newRenderer(w io.Writer) *renderer { return &renderer{w: w, tools: map[string]string{}} }

// event renders one raw event; events with nothing for people (spans)
// print nothing.
func (r *renderer) event(raw string) {
	var e wireEvent
	if err := json.Unmarshal([]byte(raw), &e); err != nil {
		r.line(time.Time{}, "event", "unreadable event: "+truncate(raw, renderMaxInput))
		return
	}
	at := e.ProcessedAt
	switch e.Type {
	case "user.message":
		r.line(at, "user", blocksText(e.Content))
	case "user.interrupt":
		r.line(at, "user", "interrupt")
	case "user.define_outcome":
		r.line(at, "user", "outcome: "+e.Description)
	case "span.outcome_evaluation_end":
		// The one evaluation span people need: the grader's verdict.
		var res string
		_ = json.Unmarshal(e.Result, &res)
		r.line(at, "grader", fmt.Sprintf("%s (evaluation %d): %s", res, e.Iteration+1, clip(e.Explanation)))
	case "user.custom_tool_result":
		r.line(at, "user", "custom tool result for "+e.CustomUseID+": "+clip(blocksText(e.Content)))
	case "user.tool_confirmation":
		var res string
		_ = json.Unmarshal(e.Result, &res)
		msg := res + " tool call " + e.ToolUseID
		if e.DenyMessage != "" {
			msg += ": " + e.DenyMessage
		}
		r.line(at, "user", msg)
	case "agent.message":
		r.line(at, "agent", blocksText(e.Content))
	case "agent.thinking":
		r.line(at, "thinking", "…")
	case "agent.tool_use", "agent.mcp_tool_use":
		r.tools[e.ID] = e.Name
		r.line(at, "tool", e.Name+"  "+toolInput(e.Name, e.Input))
	case "agent.custom_tool_use":
		r.tools[e.ID] = e.Name
		r.line(at, "custom", e.Name+"  "+toolInput(e.Name, e.Input)+"\n(waiting for user.custom_tool_result for "+e.ID+")")
	case "agent.tool_result", "agent.mcp_tool_result":
		label := "result"
		if e.IsError {
			label = "failed"
		}
		name := r.tools[e.ToolUseID]
		if name == "" {
			name = e.ToolUseID
		}
		r.line(at, label, name+"\n"+clip(blocksText(e.Content)))
	case "session.status_running":
		r.line(at, "status", "running")
	case "session.status_idle":
		msg := "idle"
		if e.StopReason.Type != "" {
			msg += " (" + e.StopReason.Type
			if len(e.StopReason.EventIDs) > 0 {
				msg += ": " + strings.Join(e.StopReason.EventIDs, ", ")
			}
			msg += ")"
		}
		r.line(at, "status", msg)
	case "agent.thread_context_compacted":
		how := "summarised"
		if e.Strategy == "drop_tool_results" {
			how = "tool outputs dropped from"
		}
		r.line(at, "context", fmt.Sprintf("compacted: %s %d messages, ~%d → ~%d tokens", how, e.Replaced.Messages, e.TokensBefore, e.TokensAfter))
	case "session.status_rescheduled":
		r.line(at, "status", "rescheduled (recovering the turn)")
	case "session.status_terminated":
		r.line(at, "status", "terminated")
	case "session.deleted":
		r.line(at, "status", "deleted")
	case "session.error":
		msg := e.Error.Message
		if e.Error.Type != "" {
			msg = e.Error.Type + ": " + msg
		}
		r.line(at, "error", msg)
	default:
		if strings.HasPrefix(e.Type, "span.") {
			return
		}
		r.line(at, "event", e.Type)
	}
}

// line prints "15:04:05  label     text", continuing a multi-line text
// indented under the first line.
func (r *renderer) line(at time.Time, label, text string) {
	ts := "--:--:--"
	if !at.IsZero() {
		ts = at.Local().Format("15:04:05")
	}
	prefix := fmt.Sprintf("%s  %-8s  ", ts, label)
	indent := strings.Repeat(" ", len(prefix))
	text = strings.TrimRight(text, "\n")
	for i, l := range strings.Split(text, "\n") {
		if i == 0 {
			fmt.Fprintf(r.w, "%s%s\n", prefix, l)
		} else {
			fmt.Fprintf(r.w, "%s%s\n", indent, l)
		}
	}
}

func blocksText(bs []wireBlock) string {
	var parts []string
	for _, b := range bs {
		switch b.Type {
		case "text":
			parts = append(parts, b.Text)
		case "":
		default:
			parts = append(parts, "["+b.Type+"]")
		}
	}
	return strings.Join(parts, "\n")
}

// toolInput shows a bash call as its command and others as compact JSON.
func toolInput(name string, in json.RawMessage) string {
	if name == "bash" {
		var b struct {
			Command string `json:"command"`
		}
		if json.Unmarshal(in, &b) == nil && b.Command != "" {
			return "$ " + truncate(b.Command, renderMaxInput)
		}
	}
	if len(in) == 0 {
		return "{}"
	}
	return truncate(string(in), renderMaxInput)
}

// clip keeps the first lines of a tool's output and says what it left
// out.
func clip(s string) string {
	s = strings.TrimRight(s, "\n")
	if s == "" {
		return "(no output)"
	}
	lines := strings.Split(s, "\n")
	more := 0
	if len(lines) > renderMaxLines {
		more = len(lines) - renderMaxLines
		lines = lines[:renderMaxLines]
	}
	out := truncate(strings.Join(lines, "\n"), renderMaxChars)
	if more > 0 {
		out += fmt.Sprintf("\n… %d more lines (--json shows all)", more)
	}
	return out
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut-- // do not split a UTF-8 sequence
	}
	return s[:cut] + fmt.Sprintf("… (%d more bytes)", len(s)-cut)
}
