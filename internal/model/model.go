// Package model puts the language-model providers agentkernel's sessions
// talk to (Anthropic Messages, OpenAI-compatible chat completions, and a
// scripted provider for demos and tests) behind one streaming interface.
//
// The types here are a small provider-neutral conversation: messages of
// blocks (text, thinking, tool_use, tool_result). Each provider translates
// them to its wire format and back.
package model

import (
	"context"
	"encoding/json"
	"errors"
)

// Roles of a message.
const (
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Block types.
const (
	BlockText             = "text"
	BlockThinking         = "thinking"
	BlockRedactedThinking = "redacted_thinking"
	BlockToolUse          = "tool_use"
	BlockToolResult       = "tool_result"
)

// Stop reasons (the Messages API's names; other providers map onto them).
const (
	StopEndTurn   = "end_turn"
	StopToolUse   = "tool_use"
	StopMaxTokens = "max_tokens"
	StopRefusal   = "refusal"
)

// Errors of the providers.
var (
	// ErrNoProvider: no provider is configured for a model.
	ErrNoProvider = errors.New("no model provider")
	// ErrScriptExhausted: the scripted provider has no turn left.
	ErrScriptExhausted = errors.New("scripted model: no turn left in the script")
)

// Block is one piece of a message.
type Block struct {
	Type string `json:"type"`
	// Text is the text of a text block.
	Text string `json:"text,omitempty"`
	// Thinking and Signature belong to a thinking block; Data to a
	// redacted_thinking block. Providers that need them echoed back (the
	// Messages API within one tool-use loop) get them back verbatim.
	Thinking  string `json:"thinking,omitempty"`
	Signature string `json:"signature,omitempty"`
	Data      string `json:"data,omitempty"`
	// ID, Name and Input belong to a tool_use block.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError belong to a tool_result block.
	ToolUseID string  `json:"tool_use_id,omitempty"`
	Content   []Block `json:"content,omitempty"`
	IsError   bool    `json:"is_error,omitempty"`
	// Cache marks the end of a stable prefix of the request (a compacted
	// conversation's summary): the Anthropic provider puts a prompt-cache
	// breakpoint there, so later requests read the prefix from the cache.
	Cache bool `json:"cache,omitempty"`
}

// Text returns a text block.
func Text(s string) Block { return Block{Type: BlockText, Text: s} }

// Message is one turn of the conversation.
type Message struct {
	Role    string  `json:"role"`
	Content []Block `json:"content"`
}

// Tool describes a tool the model may call.
type Tool struct {
	Name        string `json:"name"`
	Description string `json:"description,omitempty"`
	// InputSchema is a JSON Schema object.
	InputSchema json.RawMessage `json:"input_schema"`
}

// Request is one model call.
type Request struct {
	Model     string
	System    string
	Messages  []Message
	Tools     []Tool
	MaxTokens int64
	// IdempotencyKey is the op id of the request (seed 003): a provider
	// configured with an idempotency header sends it there, so the resend
	// of a request a crash cut off is the same request to the upstream.
	// The same op always carries the same key.
	IdempotencyKey string
	// Purpose is PurposeCompaction for the request that summarises the
	// oldest turns of a conversation too long for the model's window,
	// PurposeGrader for an outcome grader's call, and empty for a turn's
	// own requests. Providers send them alike; the scripted provider
	// answers each from its own part of the script.
	Purpose string
	// Summarized is how many assistant messages the conversation's leading
	// summary stands for (0: not compacted). Providers send nothing for
	// it; the scripted one counts them, so a script stays positional.
	Summarized int
}

// Request purposes (Request.Purpose).
const (
	PurposeCompaction = "compaction"
	PurposeGrader     = "grader"
)

// Usage counts the tokens of one call.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// Add sums u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
	}
}

// Response is the model's finished answer.
type Response struct {
	Content    []Block
	StopReason string
	Usage      Usage
}

// ToolUses returns the response's tool_use blocks in order.
func (r *Response) ToolUses() []Block {
	var out []Block
	for _, b := range r.Content {
		if b.Type == BlockToolUse {
			out = append(out, b)
		}
	}
	return out
}

// OnBlock receives each content block as soon as the stream completed it,
// so callers can publish it before the whole answer is in. An error aborts
// the stream.
type OnBlock func(b Block) error

// Provider streams one model call. Cancelling ctx aborts the stream at
// once. Blocks handed to onBlock (may be nil) are also in the Response. On
// error the Response may hold the usage counted so far (or be nil).
type Provider interface {
	Stream(ctx context.Context, req *Request, onBlock OnBlock) (*Response, error)
}

// ProviderFunc adapts a function to Provider.
type ProviderFunc func(ctx context.Context, req *Request, onBlock OnBlock) (*Response, error)

// Stream calls f.
func (f ProviderFunc) Stream(ctx context.Context, req *Request, onBlock OnBlock) (*Response, error) {
	return f(ctx, req, onBlock)
}

// DefaultMaxTokens is used when a request sets none.
const DefaultMaxTokens = 8192

// Delta is a piece of the content block in progress: its text (or
// thinking) so far grows by Text.
type Delta struct {
	// Index is the block's position in the response.
	Index int
	// Type is BlockText or BlockThinking.
	Type string
	Text string
}

// OnDelta receives each piece of a block as it streams. An error aborts
// the stream.
type OnDelta func(d Delta) error

// PartialStreamer is a Provider that hands out the block in progress as
// it streams and continues an assistant message that ends the request (a
// prefill) instead of answering it anew: the response's first text block
// is the rest of the prefill's last text. A caller that kept the text of
// an interrupted block resumes it this way. Providers without it (chat
// completions cannot continue an assistant message) repeat the block.
type PartialStreamer interface {
	Provider
	StreamPartial(ctx context.Context, req *Request, onBlock OnBlock, onDelta OnDelta) (*Response, error)
}
