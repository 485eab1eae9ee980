package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

func TestAnthropicStreamsBlocksAndToolUse(t *testing.T) {
	fake := anthropictest.New(t, anthropictest.Script(
		anthropictest.Turn{Thinking: "let me see", Text: "I will list files.", ToolUses: []anthropictest.ToolUse{{ID: "toolu_1", Name: "bash", Input: map[string]any{"command": "ls -la"}}}, InputTokens: 42, OutputTokens: 7},
		anthropictest.Turn{Text: "All done."},
	))
	p := model.NewAnthropic(model.AnthropicConfig{APIKey: "sk-test", BaseURL: fake.URL})
	req := &model.Request{
		Model: "claude-test", System: "be brief",
		Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("list files")}}},
		Tools:    []model.Tool{{Name: "bash", Description: "run", InputSchema: json.RawMessage(`{"type":"object","properties":{"command":{"type":"string"}},"required":["command"]}`)}},
	}
	var got []model.Block
	resp, err := p.Stream(context.Background(), req, func(b model.Block) error { got = append(got, b); return nil })
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got[0].Type != model.BlockThinking || got[0].Signature != "sig_fake" || got[1].Text != "I will list files." || got[2].Type != model.BlockToolUse {
		t.Fatalf("blocks = %+v", got)
	}
	var in map[string]string
	if err := json.Unmarshal(got[2].Input, &in); err != nil || in["command"] != "ls -la" || got[2].ID != "toolu_1" {
		t.Fatalf("tool input %s (%v), id %q", got[2].Input, err, got[2].ID)
	}
	if resp.StopReason != model.StopToolUse || resp.Usage.InputTokens != 42 || resp.Usage.OutputTokens != 7 {
		t.Fatalf("stop %q usage %+v", resp.StopReason, resp.Usage)
	}

	// The second call carries the whole conversation back, tool result
	// included, and the fake sees it in the wire format.
	req.Messages = append(req.Messages,
		model.Message{Role: model.RoleAssistant, Content: resp.Content},
		model.Message{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolResult, ToolUseID: "toolu_1", Content: []model.Block{model.Text("a.txt")}, IsError: true}}},
	)
	resp, err = p.Stream(context.Background(), req, nil)
	if err != nil || resp.StopReason != model.StopEndTurn || len(resp.Content) != 1 || resp.Content[0].Text != "All done." {
		t.Fatalf("second call: %+v %v", resp, err)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || reqs[1].APIKey != "sk-test" || !reqs[1].Stream {
		t.Fatalf("requests %+v", reqs)
	}
	last := reqs[1].Blocks(2)
	if len(last) != 1 || last[0].Type != "tool_result" || last[0].ToolUseID != "toolu_1" || !last[0].IsError || last[0].ToolResultText() != "a.txt" {
		t.Fatalf("tool result on the wire: %+v", last)
	}
	if len(reqs[1].Tools) != 1 {
		t.Fatalf("tools not sent: %s", reqs[1].Tools)
	}
}

func TestAnthropicCancelAbortsStream(t *testing.T) {
	fake := anthropictest.New(t, func(anthropictest.Request) anthropictest.Turn {
		return anthropictest.Turn{Text: "streaming forever", Hang: true}
	})
	p := model.NewAnthropic(model.AnthropicConfig{APIKey: "k", BaseURL: fake.URL})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-fake.Hanging; cancel() }()
	_, err := p.Stream(ctx, &model.Request{Model: "claude-x", Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("hi")}}}}, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestAnthropicHTTPErrorIsClassified(t *testing.T) {
	fake := anthropictest.New(t, func(anthropictest.Request) anthropictest.Turn { return anthropictest.Turn{Status: 529} })
	p := model.NewAnthropic(model.AnthropicConfig{APIKey: "k", BaseURL: fake.URL, MaxRetries: 1})
	_, err := p.Stream(context.Background(), &model.Request{Model: "claude-x", Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("hi")}}}}, nil)
	var ae *model.APIError
	if !errors.As(err, &ae) || ae.Status != 529 || model.ErrorKind(err) != "model_overloaded_error" {
		t.Fatalf("err = %v", err)
	}
}

// TestAnthropicStreamsDeltas: StreamPartial hands out the thinking and
// text of each block as its deltas arrive, before the block completes.
func TestAnthropicStreamsDeltas(t *testing.T) {
	fake := anthropictest.New(t, anthropictest.Script(anthropictest.Turn{Thinking: "hmm", Text: "Hello, world."}))
	p := model.NewAnthropic(model.AnthropicConfig{APIKey: "sk-test", BaseURL: fake.URL})
	var log []string
	_, err := p.StreamPartial(context.Background(),
		&model.Request{Model: "claude-test", Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("hi")}}}},
		func(b model.Block) error { log = append(log, "block "+b.Type); return nil },
		func(d model.Delta) error {
			log = append(log, fmt.Sprintf("delta %d %s %q", d.Index, d.Type, d.Text))
			return nil
		})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`delta 0 thinking "hmm"`, "block thinking", `delta 1 text "Hello,"`, `delta 1 text " world."`, "block text"}
	if !slices.Equal(log, want) {
		t.Fatalf("stream %q, want %q", log, want)
	}
}
