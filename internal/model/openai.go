package model

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sort"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// OpenAIConfig configures the chat-completions provider. It serves OpenAI
// and every compatible server (Ollama, vLLM, llama.cpp) through BaseURL.
type OpenAIConfig struct {
	APIKey     string
	BaseURL    string
	HTTPClient *http.Client
	// IdempotencyHeader, when set, is the request header that carries
	// Request.IdempotencyKey. Chat completions document none; a gateway
	// in front of the server may.
	IdempotencyHeader string
}

// OpenAI streams chat completions through openai-go.
type OpenAI struct {
	client    openai.Client
	keyHeader string
}

// NewOpenAI builds the provider.
func NewOpenAI(cfg OpenAIConfig) *OpenAI {
	var opts []option.RequestOption
	// Local servers take any key, but the SDK refuses to send none.
	key := cfg.APIKey
	if key == "" {
		key = "agentkernel"
	}
	opts = append(opts, option.WithAPIKey(key))
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, option.WithHTTPClient(cfg.HTTPClient))
	}
	return &OpenAI{client: openai.NewClient(opts...), keyHeader: cfg.IdempotencyHeader}
}

// Stream implements Provider. Chat completions stream text and tool-call
// arguments as fragments; the blocks are handed out once the stream ends.
func (o *OpenAI) Stream(ctx context.Context, req *Request, onBlock OnBlock) (*Response, error) {
	params, err := openaiParams(req)
	if err != nil {
		return nil, err
	}
	var opts []option.RequestOption
	if o.keyHeader != "" && req.IdempotencyKey != "" {
		opts = append(opts, option.WithHeader(o.keyHeader, req.IdempotencyKey))
	}
	stream := o.client.Chat.Completions.NewStreaming(ctx, params, opts...)
	defer stream.Close()
	var (
		text   strings.Builder
		calls  = map[int64]*Block{}
		finish string
		resp   = &Response{}
	)
	for stream.Next() {
		ch := stream.Current()
		if ch.Usage.PromptTokens > 0 || ch.Usage.CompletionTokens > 0 {
			cached := ch.Usage.PromptTokensDetails.CachedTokens
			resp.Usage = Usage{InputTokens: ch.Usage.PromptTokens - cached, OutputTokens: ch.Usage.CompletionTokens, CacheReadInputTokens: cached}
		}
		for _, c := range ch.Choices {
			if c.Index != 0 {
				continue
			}
			text.WriteString(c.Delta.Content)
			for _, tc := range c.Delta.ToolCalls {
				b := calls[tc.Index]
				if b == nil {
					b = &Block{Type: BlockToolUse}
					calls[tc.Index] = b
				}
				if tc.ID != "" {
					b.ID = tc.ID
				}
				if tc.Function.Name != "" {
					b.Name += tc.Function.Name
				}
				b.Input = append(b.Input, tc.Function.Arguments...)
			}
			if c.FinishReason != "" {
				finish = c.FinishReason
			}
		}
	}
	if err := stream.Err(); err != nil {
		if ctx.Err() != nil {
			return resp, ctx.Err()
		}
		var ae *openai.Error
		if errors.As(err, &ae) {
			return resp, &APIError{Provider: ProviderOpenAI, Status: ae.StatusCode, Message: ae.Error(), Err: err}
		}
		return resp, err
	}
	if text.Len() > 0 {
		resp.Content = append(resp.Content, Text(text.String()))
	}
	idx := make([]int64, 0, len(calls))
	for i := range calls {
		idx = append(idx, i)
	}
	sort.Slice(idx, func(a, b int) bool { return idx[a] < idx[b] })
	for _, i := range idx {
		b := *calls[i]
		if len(b.Input) == 0 || !json.Valid(b.Input) {
			b.Input = json.RawMessage("{}")
		}
		resp.Content = append(resp.Content, b)
	}
	switch finish {
	case "tool_calls", "function_call":
		resp.StopReason = StopToolUse
	case "length":
		resp.StopReason = StopMaxTokens
	case "content_filter":
		resp.StopReason = StopRefusal
	default:
		resp.StopReason = StopEndTurn
	}
	if len(calls) > 0 {
		resp.StopReason = StopToolUse
	}
	if onBlock != nil {
		for _, b := range resp.Content {
			if err := onBlock(b); err != nil {
				return resp, err
			}
		}
	}
	return resp, nil
}

func openaiParams(req *Request) (openai.ChatCompletionNewParams, error) {
	p := openai.ChatCompletionNewParams{
		Model:         shared.ChatModel(req.Model),
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if req.MaxTokens > 0 {
		p.MaxCompletionTokens = openai.Int(req.MaxTokens)
	}
	if req.System != "" {
		p.Messages = append(p.Messages, openai.SystemMessage(req.System))
	}
	for _, m := range req.Messages {
		if m.Role == RoleAssistant {
			a := openai.ChatCompletionAssistantMessageParam{}
			var text strings.Builder
			for _, b := range m.Content {
				switch b.Type {
				case BlockText:
					text.WriteString(b.Text)
				case BlockToolUse:
					a.ToolCalls = append(a.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
						OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
							ID:       b.ID,
							Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: b.Name, Arguments: string(b.Input)},
						},
					})
				}
			}
			if text.Len() > 0 {
				a.Content.OfString = openai.String(text.String())
			}
			if text.Len() == 0 && len(a.ToolCalls) == 0 {
				continue
			}
			p.Messages = append(p.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &a})
			continue
		}
		// Tool results become tool messages (they must follow the assistant
		// message that called them); the rest is one user message.
		var text strings.Builder
		for _, b := range m.Content {
			switch b.Type {
			case BlockToolResult:
				var out strings.Builder
				if b.IsError {
					out.WriteString("Error: ")
				}
				for _, c := range b.Content {
					out.WriteString(c.Text)
				}
				p.Messages = append(p.Messages, openai.ToolMessage(out.String(), b.ToolUseID))
			case BlockText:
				if text.Len() > 0 {
					text.WriteString("\n\n")
				}
				text.WriteString(b.Text)
			}
		}
		if text.Len() > 0 {
			p.Messages = append(p.Messages, openai.UserMessage(text.String()))
		}
	}
	for _, t := range req.Tools {
		var params shared.FunctionParameters
		if len(t.InputSchema) > 0 {
			if err := json.Unmarshal(t.InputSchema, &params); err != nil {
				return p, err
			}
		}
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: params}
		if t.Description != "" {
			fd.Description = openai.String(t.Description)
		}
		p.Tools = append(p.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	return p, nil
}
