// Package anthropictest is an in-process fake of the Anthropic Messages API
// that speaks the real streaming wire format (message_start,
// content_block_start/delta/stop, message_delta, message_stop) and plays
// scripted turns. Tests point the anthropic provider (or ANTHROPIC_BASE_URL)
// at it.
package anthropictest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// ToolUse is a tool call the fake model makes.
type ToolUse struct {
	ID    string
	Name  string
	Input any
}

// Turn is one scripted assistant response.
type Turn struct {
	Thinking string
	Text     string
	ToolUses []ToolUse
	// StopReason defaults to tool_use with tool uses, else end_turn.
	StopReason string
	// Hang streams the start of the text and then blocks until the client
	// goes away (an interrupted stream).
	Hang bool
	// HangAfter streams every block whole and then blocks until the
	// client goes away, before the message ends (a stream cut off after
	// it delivered its blocks).
	HangAfter bool
	// Status, when not 0, answers with this HTTP error instead.
	Status       int
	InputTokens  int64
	OutputTokens int64
	// CacheReadTokens and CacheCreationTokens are the usage's prompt-cache
	// counts.
	CacheReadTokens     int64
	CacheCreationTokens int64
}

// Message is a message of a received request.
type Message struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// Block is a content block of a received request.
type Block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
}

// Request is a received /v1/messages request.
type Request struct {
	Model    string            `json:"model"`
	System   json.RawMessage   `json:"system,omitempty"`
	Messages []Message         `json:"messages"`
	Tools    []json.RawMessage `json:"tools,omitempty"`
	Stream   bool              `json:"stream"`
	APIKey   string            `json:"-"`
	// Header is the request's HTTP header.
	Header http.Header `json:"-"`
}

// Blocks returns the content blocks of message i (a string content is one
// text block).
func (r Request) Blocks(i int) []Block {
	var s string
	if json.Unmarshal(r.Messages[i].Content, &s) == nil {
		return []Block{{Type: "text", Text: s}}
	}
	var out []Block
	_ = json.Unmarshal(r.Messages[i].Content, &out)
	return out
}

// AllBlocks returns every block of every message.
func (r Request) AllBlocks() []Block {
	var out []Block
	for i := range r.Messages {
		out = append(out, r.Blocks(i)...)
	}
	return out
}

// ToolResultText is the text of a tool_result block.
func (b Block) ToolResultText() string {
	var s string
	if json.Unmarshal(b.Content, &s) == nil {
		return s
	}
	var parts []Block
	_ = json.Unmarshal(b.Content, &parts)
	for _, p := range parts {
		s += p.Text
	}
	return s
}

// AssistantTurns counts the assistant messages of the request: the index
// of the response it asks for within its conversation.
func (r Request) AssistantTurns() int {
	n := 0
	for _, m := range r.Messages {
		if m.Role == "assistant" {
			n++
		}
	}
	return n
}

// Server is the fake Messages API.
type Server struct {
	*httptest.Server
	play func(Request) Turn

	mu       sync.Mutex
	requests []Request
	// Hanging receives a value each time a Hang or HangAfter turn is
	// blocked.
	Hanging chan struct{}
}

// New starts a fake whose answers come from play. It closes with the test.
func New(t testing.TB, play func(Request) Turn) *Server {
	s := &Server{play: play, Hanging: make(chan struct{}, 16)}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

// Script plays turns by their position in the conversation.
func Script(turns ...Turn) func(Request) Turn {
	return func(r Request) Turn {
		n := r.AssistantTurns()
		if n >= len(turns) {
			return Turn{Text: fmt.Sprintf("(script exhausted at turn %d)", n)}
		}
		return turns[n]
	}
}

// Requests returns the requests received so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
		http.Error(w, `{"type":"error","error":{"type":"not_found_error","message":"not found"}}`, http.StatusNotFound)
		return
	}
	raw, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	var req Request
	if err := json.Unmarshal(raw, &req); err != nil {
		http.Error(w, `{"type":"error","error":{"type":"invalid_request_error","message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	req.APIKey = r.Header.Get("X-Api-Key")
	req.Header = r.Header.Clone()
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.mu.Unlock()
	turn := s.play(req)
	if turn.Status != 0 {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Should-Retry", "false")
		w.WriteHeader(turn.Status)
		fmt.Fprintf(w, `{"type":"error","error":{"type":"api_error","message":"fake error %d"}}`, turn.Status)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	send := func(typ string, data any) {
		b, _ := json.Marshal(data)
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b)
		if fl != nil {
			fl.Flush()
		}
	}
	in := turn.InputTokens
	if in == 0 {
		in = 10
	}
	out := turn.OutputTokens
	if out == 0 {
		out = 5
	}
	send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": "msg_fake", "type": "message", "role": "assistant", "model": req.Model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": in, "output_tokens": 1, "cache_creation_input_tokens": turn.CacheCreationTokens, "cache_read_input_tokens": turn.CacheReadTokens},
	}})
	send("ping", map[string]any{"type": "ping"})
	idx := 0
	if turn.Thinking != "" {
		send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "thinking", "thinking": "", "signature": ""}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "thinking_delta", "thinking": turn.Thinking}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "signature_delta", "signature": "sig_fake"}})
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if turn.Text != "" || turn.Hang {
		half := len(turn.Text) / 2
		send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "text", "text": ""}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": turn.Text[:half]}})
		if turn.Hang {
			select {
			case s.Hanging <- struct{}{}:
			default:
			}
			<-r.Context().Done()
			return
		}
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "text_delta", "text": turn.Text[half:]}})
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	for i, tu := range turn.ToolUses {
		id := tu.ID
		if id == "" {
			id = fmt.Sprintf("toolu_fake_%d_%d", req.AssistantTurns(), i)
		}
		input, _ := json.Marshal(tu.Input)
		half := len(input) / 2
		send("content_block_start", map[string]any{"type": "content_block_start", "index": idx, "content_block": map[string]any{"type": "tool_use", "id": id, "name": tu.Name, "input": map[string]any{}}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input[:half])}})
		send("content_block_delta", map[string]any{"type": "content_block_delta", "index": idx, "delta": map[string]any{"type": "input_json_delta", "partial_json": string(input[half:])}})
		send("content_block_stop", map[string]any{"type": "content_block_stop", "index": idx})
		idx++
	}
	if turn.HangAfter {
		select {
		case s.Hanging <- struct{}{}:
		default:
		}
		<-r.Context().Done()
		return
	}
	stop := turn.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(turn.ToolUses) > 0 {
			stop = "tool_use"
		}
	}
	send("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": out}})
	send("message_stop", map[string]any{"type": "message_stop"})
}
