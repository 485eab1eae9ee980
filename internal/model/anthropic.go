package model

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"
)

// AnthropicConfig configures the Messages API provider. Empty fields keep
// the SDK's own defaults (ANTHROPIC_API_KEY, ANTHROPIC_BASE_URL, …).
type AnthropicConfig struct {
	APIKey     string
	AuthToken  string
	BaseURL    string
	HTTPClient *http.Client
	// MaxRetries overrides the SDK's retry count (-1 keeps the default).
	MaxRetries int
	// IdempotencyHeader, when set, is the request header that carries
	// Request.IdempotencyKey. The Messages API documents none; a gateway
	// in front of it may (its name is the operator's to give).
	IdempotencyHeader string
}

// Anthropic streams the Messages API through anthropic-sdk-go.
type Anthropic struct {
	client    anthropic.Client
	keyHeader string
}

// NewAnthropic builds the provider.
func NewAnthropic(cfg AnthropicConfig) *Anthropic {
	var opts []option.RequestOption
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	} else if cfg.AuthToken != "" {
		opts = append(opts, option.WithAuthToken(cfg.AuthToken))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	if cfg.MaxRetries > 0 {
		opts = append(opts, option.WithMaxRetries(cfg.MaxRetries))
	}
	return &Anthropic{client: anthropic.NewClient(opts...), keyHeader: cfg.IdempotencyHeader}
}

// Stream implements Provider.
func (a *Anthropic) Stream(ctx context.Context, req *Request, onBlock OnBlock) (*Response, error) {
	return a.StreamPartial(ctx, req, onBlock, nil)
}

// StreamPartial implements PartialStreamer: the Messages API continues a
// final assistant message.
func (a *Anthropic) StreamPartial(ctx context.Context, req *Request, onBlock OnBlock, onDelta OnDelta) (*Response, error) {
	params, err := anthropicParams(req)
	if err != nil {
		return nil, err
	}
	var opts []option.RequestOption
	if a.keyHeader != "" && req.IdempotencyKey != "" {
		opts = append(opts, option.WithHeader(a.keyHeader, req.IdempotencyKey))
	}
	stream := a.client.Messages.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var msg anthropic.Message
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return partial(&msg), err
		}
		if ev.Type == "content_block_delta" && onDelta != nil {
			if d, ok := anthropicDelta(ev); ok {
				if err := onDelta(d); err != nil {
					return partial(&msg), err
				}
			}
		}
		if ev.Type == "content_block_stop" && onBlock != nil && int(ev.Index) < len(msg.Content) {
			if err := onBlock(fromAnthropicBlock(msg.Content[ev.Index])); err != nil {
				return partial(&msg), err
			}
		}
	}
	if err := stream.Err(); err != nil {
		if ctx.Err() != nil {
			return partial(&msg), ctx.Err()
		}
		var ae *anthropic.Error
		if errors.As(err, &ae) {
			return partial(&msg), &APIError{Provider: ProviderAnthropic, Status: ae.StatusCode, Message: ae.Error(), Err: err}
		}
		return partial(&msg), err
	}
	resp := partial(&msg)
	for _, b := range msg.Content {
		resp.Content = append(resp.Content, fromAnthropicBlock(b))
	}
	resp.StopReason = string(msg.StopReason)
	return resp, nil
}

// anthropicDelta is the text or thinking piece of a content_block_delta.
func anthropicDelta(ev anthropic.MessageStreamEventUnion) (Delta, bool) {
	switch ev.Delta.Type {
	case "text_delta":
		return Delta{Index: int(ev.Index), Type: BlockText, Text: ev.Delta.Text}, true
	case "thinking_delta":
		return Delta{Index: int(ev.Index), Type: BlockThinking, Text: ev.Delta.Thinking}, true
	}
	return Delta{}, false
}

func partial(msg *anthropic.Message) *Response {
	return &Response{Usage: Usage{
		InputTokens:              msg.Usage.InputTokens,
		OutputTokens:             msg.Usage.OutputTokens,
		CacheCreationInputTokens: msg.Usage.CacheCreationInputTokens,
		CacheReadInputTokens:     msg.Usage.CacheReadInputTokens,
	}}
}

func fromAnthropicBlock(b anthropic.ContentBlockUnion) Block {
	switch b.Type {
	case "text":
		return Text(b.Text)
	case "thinking":
		return Block{Type: BlockThinking, Thinking: b.Thinking, Signature: b.Signature}
	case "redacted_thinking":
		return Block{Type: BlockRedactedThinking, Data: b.Data}
	case "tool_use":
		in := b.Input
		if len(in) == 0 {
			in = json.RawMessage("{}")
		}
		return Block{Type: BlockToolUse, ID: b.ID, Name: b.Name, Input: in}
	}
	return Block{Type: b.Type}
}

func anthropicParams(req *Request) (anthropic.MessageNewParams, error) {
	p := anthropic.MessageNewParams{
		Model:     anthropic.Model(req.Model),
		MaxTokens: req.MaxTokens,
	}
	if p.MaxTokens <= 0 {
		p.MaxTokens = DefaultMaxTokens
	}
	// Prompt caching: the system prompt, the tools and a compacted
	// conversation's summary are the request's stable prefix, the same on
	// every step of a session; a breakpoint after each (system, last
	// tool, summary: 3 of the 4 the API allows) lets repeated requests
	// read it from the cache instead of paying for it again.
	if req.System != "" {
		p.System = []anthropic.TextBlockParam{{Text: req.System, CacheControl: anthropic.NewCacheControlEphemeralParam()}}
	}
	for _, m := range req.Messages {
		var blocks []anthropic.ContentBlockParamUnion
		for _, b := range m.Content {
			switch b.Type {
			case BlockText:
				if b.Text != "" {
					tb := anthropic.TextBlockParam{Text: b.Text}
					if b.Cache {
						tb.CacheControl = anthropic.NewCacheControlEphemeralParam()
					}
					blocks = append(blocks, anthropic.ContentBlockParamUnion{OfText: &tb})
				}
			case BlockThinking:
				blocks = append(blocks, anthropic.NewThinkingBlock(b.Signature, b.Thinking))
			case BlockRedactedThinking:
				blocks = append(blocks, anthropic.NewRedactedThinkingBlock(b.Data))
			case BlockToolUse:
				in := b.Input
				if len(in) == 0 {
					in = json.RawMessage("{}")
				}
				blocks = append(blocks, anthropic.NewToolUseBlock(b.ID, in, b.Name))
			case BlockToolResult:
				tr := anthropic.ToolResultBlockParam{ToolUseID: b.ToolUseID}
				if b.IsError {
					tr.IsError = anthropic.Bool(true)
				}
				for _, c := range b.Content {
					if c.Type == BlockText {
						tr.Content = append(tr.Content, anthropic.ToolResultBlockParamContentUnion{OfText: &anthropic.TextBlockParam{Text: c.Text}})
					}
				}
				blocks = append(blocks, anthropic.ContentBlockParamUnion{OfToolResult: &tr})
			}
		}
		if len(blocks) == 0 {
			continue
		}
		if m.Role == RoleAssistant {
			p.Messages = append(p.Messages, anthropic.NewAssistantMessage(blocks...))
		} else {
			p.Messages = append(p.Messages, anthropic.NewUserMessage(blocks...))
		}
	}
	for _, t := range req.Tools {
		schema, err := toolSchema(t.InputSchema)
		if err != nil {
			return p, err
		}
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		p.Tools = append(p.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	if n := len(p.Tools); n > 0 {
		p.Tools[n-1].OfTool.CacheControl = anthropic.NewCacheControlEphemeralParam()
	}
	return p, nil
}

func toolSchema(raw json.RawMessage) (anthropic.ToolInputSchemaParam, error) {
	// Type set, so that a schema of {"type": "object"} alone is not a zero
	// struct, which the SDK would leave out of the request (input_schema is
	// required by the Messages API).
	s := anthropic.ToolInputSchemaParam{Type: "object"}
	if len(raw) == 0 {
		return s, nil
	}
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return s, err
	}
	s.Properties = m["properties"]
	if req, ok := m["required"].([]any); ok {
		for _, r := range req {
			if str, ok := r.(string); ok {
				s.Required = append(s.Required, str)
			}
		}
	}
	delete(m, "properties")
	delete(m, "required")
	delete(m, "type")
	if len(m) > 0 {
		s.ExtraFields = m
	}
	return s, nil
}
