package model_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestAnthropicMarksTheStablePrefixForCaching: the system prompt, the last
// tool and a block marked Cache (a compaction's summary) carry
// cache_control ephemeral on the wire, nothing else does, and the cache
// counts of the answer's usage come back.
func TestAnthropicMarksTheStablePrefixForCaching(t *testing.T) {
	fake := anthropictest.New(t, func(anthropictest.Request) anthropictest.Turn {
		return anthropictest.Turn{Text: "ok", CacheReadTokens: 120, CacheCreationTokens: 30}
	})
	p := model.NewAnthropic(model.AnthropicConfig{APIKey: "sk-test", BaseURL: fake.URL})
	summary := model.Text("summary of earlier turns")
	summary.Cache = true
	schema := json.RawMessage(`{"type":"object"}`)
	resp, err := p.Stream(context.Background(), &model.Request{
		Model: "claude-test", System: "be brief",
		Messages: []model.Message{
			{Role: model.RoleUser, Content: []model.Block{summary}},
			{Role: model.RoleAssistant, Content: []model.Block{model.Text("noted")}},
			{Role: model.RoleUser, Content: []model.Block{model.Text("go on")}},
		},
		Tools: []model.Tool{{Name: "a", InputSchema: schema}, {Name: "b", InputSchema: schema}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.Usage.CacheReadInputTokens != 120 || resp.Usage.CacheCreationInputTokens != 30 {
		t.Fatalf("usage %+v", resp.Usage)
	}
	const mark = `"cache_control":{"type":"ephemeral"}`
	r := fake.Requests()[0]
	if !strings.Contains(string(r.System), mark) {
		t.Errorf("system %s: no breakpoint", r.System)
	}
	if strings.Contains(string(r.Tools[0]), mark) || !strings.Contains(string(r.Tools[1]), mark) {
		t.Errorf("tools %s: want the breakpoint on the last tool only", r.Tools)
	}
	for i, m := range r.Messages {
		if has := strings.Contains(string(m.Content), mark); has != (i == 0) {
			t.Errorf("message %d %s: breakpoint %v", i, m.Content, has)
		}
	}
}

// TestScriptedCompaction: the scripted provider answers a summary request
// with the script's summary (not a turn), and after a compaction keeps its
// place in the script by the assistant messages the summary stands for.
func TestScriptedCompaction(t *testing.T) {
	p := model.NewScripted(model.Script{Turns: []model.ScriptTurn{{Text: "t0"}, {Text: "t1"}, {Text: "t2"}}, Summary: "S"})
	user := model.Message{Role: model.RoleUser, Content: []model.Block{model.Text("u")}}
	asst := model.Message{Role: model.RoleAssistant, Content: []model.Block{model.Text("a")}}
	resp, err := p.Stream(context.Background(), &model.Request{Messages: []model.Message{user, asst, user}, Purpose: model.PurposeCompaction}, nil)
	if err != nil || resp.Content[0].Text != "S" {
		t.Fatalf("summary %+v %v", resp, err)
	}
	resp, err = p.Stream(context.Background(), &model.Request{Messages: []model.Message{user, asst, user}, Summarized: 1}, nil)
	if err != nil || resp.Content[0].Text != "t2" {
		t.Fatalf("after a compaction of one turn: %+v %v, want t2", resp, err)
	}
}

// TestContextWindowDefaults: Claude models on the anthropic provider get a
// 200k window, others none unless configured; compact_at defaults to 0.8.
func TestContextWindowDefaults(t *testing.T) {
	reg, err := model.NewRegistry(model.RegistryConfig{Environ: []string{"ANTHROPIC_API_KEY=k", "OPENAI_API_KEY=k"}, Routes: []model.Route{
		{Pattern: "gpt-*", Provider: model.ProviderOpenAI},
		{Pattern: "claude-small", Provider: model.ProviderAnthropic, ContextWindow: 5000, CompactAt: 0.5},
	}})
	if err != nil {
		t.Fatal(err)
	}
	for id, want := range map[string][2]float64{"claude-sonnet-4-5": {200000, 0.8}, "gpt-4o": {0, 0.8}, "claude-small": {5000, 0.5}} {
		r, err := reg.Resolve(id)
		if err != nil || float64(r.ContextWindow) != want[0] || r.CompactAt != want[1] {
			t.Errorf("%s: window %d compact_at %v (%v), want %v", id, r.ContextWindow, r.CompactAt, err, want)
		}
	}
}
