package model

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Script is the scripted provider's file: the assistant turns it plays.
// The n-th model call of a conversation (n = the number of assistant
// messages already in it) gets Turns[n], so a script is deterministic per
// session and needs no state. With Loop the turns repeat.
//
// JSON or YAML (by extension), either this object or a bare list of turns:
//
//	{"turns": [
//	  {"tool_calls": [{"name": "bash", "input": {"command": "echo hi > a.txt"}}]},
//	  {"text": "Done."}
//	]}
//
// A compaction's summary request (Request.Purpose) is not a turn: it is
// answered with Summary, or, when that is empty, a summary naming how many
// messages it replaces.
// Grader holds the answers to an outcome grader's calls (Request.Purpose
// = PurposeGrader), picked the same way: the n-th evaluation of an outcome
// (its request holds the n earlier verdicts as assistant messages) gets
// Grader[n]; with Loop they repeat.
type Script struct {
	Turns   []ScriptTurn `json:"turns"`
	Grader  []ScriptTurn `json:"grader,omitempty"`
	Loop    bool         `json:"loop,omitempty"`
	Summary string       `json:"summary,omitempty"`
}

// ScriptTurn is one assistant response.
type ScriptTurn struct {
	Thinking string `json:"thinking,omitempty"`
	Text     string `json:"text,omitempty"`
	// Deltas streams the text in these pieces (Text, when set too, must
	// be their concatenation).
	Deltas    []string         `json:"deltas,omitempty"`
	ToolCalls []ScriptToolCall `json:"tool_calls,omitempty"`
	// StopReason defaults to tool_use when there are tool calls, else
	// end_turn.
	StopReason string `json:"stop_reason,omitempty"`
	// DelayMS waits before answering (a slow model, for interrupt demos).
	DelayMS int64  `json:"delay_ms,omitempty"`
	Usage   *Usage `json:"usage,omitempty"`
	// Error fails the call with this message instead of answering.
	Error string `json:"error,omitempty"`
}

// ScriptToolCall is a tool call of a scripted turn.
type ScriptToolCall struct {
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input,omitempty"`
}

// Scripted plays a Script.
type Scripted struct {
	script Script
}

// NewScripted returns a provider playing s. A turn with Deltas and no Text
// gets their concatenation as its Text.
func NewScripted(s Script) *Scripted {
	s.Turns = append([]ScriptTurn(nil), s.Turns...)
	s.Grader = append([]ScriptTurn(nil), s.Grader...)
	for _, ts := range [][]ScriptTurn{s.Turns, s.Grader} {
		for i := range ts {
			if t := &ts[i]; t.Text == "" {
				t.Text = strings.Join(t.Deltas, "")
			}
		}
	}
	return &Scripted{script: s}
}

// LoadScript reads a script file (JSON, or YAML for .yaml/.yml).
func LoadScript(path string) (*Scripted, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scripted model: %w", err)
	}
	s, err := ParseScript(raw, strings.ToLower(filepath.Ext(path)))
	if err != nil {
		return nil, fmt.Errorf("scripted model %s: %w", path, err)
	}
	return NewScripted(s), nil
}

// ParseScript decodes a script; ext ".yaml"/".yml" selects YAML.
func ParseScript(raw []byte, ext string) (Script, error) {
	if ext == ".yaml" || ext == ".yml" {
		var v any
		if err := yaml.Unmarshal(raw, &v); err != nil {
			return Script{}, err
		}
		var err error
		if raw, err = json.Marshal(v); err != nil {
			return Script{}, err
		}
	}
	var s Script
	trimmed := strings.TrimSpace(string(raw))
	if strings.HasPrefix(trimmed, "[") {
		if err := json.Unmarshal(raw, &s.Turns); err != nil {
			return Script{}, err
		}
	} else if err := json.Unmarshal(raw, &s); err != nil {
		return Script{}, err
	}
	if len(s.Turns) == 0 {
		return Script{}, fmt.Errorf("no turns")
	}
	for _, list := range []struct {
		name  string
		turns []ScriptTurn
	}{{"turns", s.Turns}, {"grader", s.Grader}} {
		for i, t := range list.turns {
			if len(t.Deltas) > 0 && t.Text != "" && t.Text != strings.Join(t.Deltas, "") {
				return Script{}, fmt.Errorf("%s[%d]: text must be the concatenation of deltas", list.name, i)
			}
			for j, c := range t.ToolCalls {
				if c.Name == "" {
					return Script{}, fmt.Errorf("%s[%d].tool_calls[%d]: name is required", list.name, i, j)
				}
			}
		}
	}
	return s, nil
}

// Stream implements Provider.
func (s *Scripted) Stream(ctx context.Context, req *Request, onBlock OnBlock) (*Response, error) {
	return s.StreamPartial(ctx, req, onBlock, nil)
}

// StreamPartial implements PartialStreamer. A request that ends with an
// assistant message continues the turn that message began, as the
// Messages API does: the prefill must be the start of the turn's content
// (else the call fails, so a test sees a wrong prefill), and the answer is
// the rest: the remainder of the text in progress, then the blocks after.
func (s *Scripted) StreamPartial(ctx context.Context, req *Request, onBlock OnBlock, onDelta OnDelta) (*Response, error) {
	if req.Purpose == PurposeCompaction {
		return s.summarize(ctx, req, onBlock)
	}
	// The assistant messages a summary replaced still count: the script's
	// position is the conversation's, not the request's.
	n := req.Summarized
	for _, m := range req.Messages {
		if m.Role == RoleAssistant {
			n++
		}
	}
	var prefill []Block
	if k := len(req.Messages); k > 0 && req.Messages[k-1].Role == RoleAssistant {
		prefill, n = req.Messages[k-1].Content, n-1
	}
	turns, what := s.script.Turns, "turns"
	if req.Purpose == PurposeGrader {
		turns, what = s.script.Grader, "grader turns"
	}
	if n >= len(turns) {
		if !s.script.Loop || len(turns) == 0 {
			return nil, fmt.Errorf("%w (%d %s, call %d)", ErrScriptExhausted, len(turns), what, n+1)
		}
		n %= len(turns)
	}
	t := turns[n]
	if t.DelayMS > 0 {
		tm := time.NewTimer(time.Duration(t.DelayMS) * time.Millisecond)
		select {
		case <-ctx.Done():
			tm.Stop()
			return &Response{}, ctx.Err()
		case <-tm.C:
		}
	}
	if err := ctx.Err(); err != nil {
		return &Response{}, err
	}
	if t.Error != "" {
		return &Response{}, &APIError{Provider: ProviderScripted, Status: 500, Message: t.Error}
	}
	resp := &Response{StopReason: t.StopReason}
	if t.Thinking != "" {
		resp.Content = append(resp.Content, Block{Type: BlockThinking, Thinking: t.Thinking})
	}
	if t.Text != "" {
		resp.Content = append(resp.Content, Text(t.Text))
	}
	for i, c := range t.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("toolu_script_%d_%d", n, i)
		}
		in := c.Input
		if len(in) == 0 {
			in = json.RawMessage("{}")
		}
		resp.Content = append(resp.Content, Block{Type: BlockToolUse, ID: id, Name: c.Name, Input: in})
	}
	if resp.StopReason == "" {
		resp.StopReason = StopEndTurn
		if len(t.ToolCalls) > 0 {
			resp.StopReason = StopToolUse
		}
	}
	if t.Usage != nil {
		resp.Usage = *t.Usage
	}
	pieces := t.Deltas
	if len(pieces) == 0 && t.Text != "" {
		pieces = []string{t.Text}
	}
	if prefill != nil {
		rest, skipped, err := continueAfter(resp.Content, prefill)
		if err != nil {
			return &Response{}, fmt.Errorf("scripted model, turn %d: %w", n, err)
		}
		resp.Content = rest
		pieces = cutPieces(pieces, skipped)
	}
	for i, b := range resp.Content {
		if b.Type == BlockText && onDelta != nil {
			for _, p := range pieces {
				if err := onDelta(Delta{Index: i, Type: BlockText, Text: p}); err != nil {
					return resp, err
				}
			}
		}
		if onBlock != nil {
			if err := onBlock(b); err != nil {
				return resp, err
			}
		}
	}
	return resp, nil
}

// continueAfter is what is left of content after the prefill: the blocks
// the prefill holds whole are dropped, and a last prefill text that is the
// start of its block leaves the block's rest. skipped is the length of
// that start.
func continueAfter(content, prefill []Block) (rest []Block, skipped int, err error) {
	for i, p := range prefill {
		if i >= len(content) || content[i].Type != p.Type {
			return nil, 0, fmt.Errorf("the assistant prefill's block %d (%s) is not in the turn", i, p.Type)
		}
		c := content[i]
		if p.Type != BlockText || c.Text == p.Text {
			continue
		}
		if i != len(prefill)-1 || !strings.HasPrefix(c.Text, p.Text) {
			return nil, 0, fmt.Errorf("the assistant prefill's text %q does not begin the turn's text %q", p.Text, c.Text)
		}
		out := []Block{Text(c.Text[len(p.Text):])}
		return append(out, content[i+1:]...), len(p.Text), nil
	}
	return append([]Block(nil), content[len(prefill):]...), 0, nil
}

// cutPieces drops the first skip bytes of the text the pieces stream.
func cutPieces(pieces []string, skip int) []string {
	var out []string
	for _, p := range pieces {
		switch {
		case skip >= len(p):
			skip -= len(p)
		default:
			out = append(out, p[skip:])
			skip = 0
		}
	}
	return out
}

// summarize answers a compaction's summary request.
func (s *Scripted) summarize(ctx context.Context, req *Request, onBlock OnBlock) (*Response, error) {
	if err := ctx.Err(); err != nil {
		return &Response{}, err
	}
	text := s.script.Summary
	if text == "" {
		text = fmt.Sprintf("Summary of the %d earlier messages of the conversation.", max(len(req.Messages)-1, 0))
	}
	resp := &Response{Content: []Block{Text(text)}, StopReason: StopEndTurn}
	if onBlock != nil {
		if err := onBlock(resp.Content[0]); err != nil {
			return resp, err
		}
	}
	return resp, nil
}
