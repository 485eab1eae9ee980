package model_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/model"
)

func TestScriptedPlaysTurnsByPosition(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "demo.yaml")
	if err := os.WriteFile(path, []byte(`
turns:
  - text: "Writing the file."
    tool_calls:
      - name: bash
        input: {command: "echo hi > a.txt"}
  - text: "Done."
    usage: {input_tokens: 3, output_tokens: 2}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := model.LoadScript(path)
	if err != nil {
		t.Fatal(err)
	}
	req := &model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: []model.Block{model.Text("go")}}}}
	r1, err := p.Stream(context.Background(), req, nil)
	if err != nil || r1.StopReason != model.StopToolUse || len(r1.ToolUses()) != 1 || string(r1.ToolUses()[0].Input) != `{"command":"echo hi \u003e a.txt"}` && string(r1.ToolUses()[0].Input) != `{"command":"echo hi > a.txt"}` {
		t.Fatalf("first: %+v %v", r1, err)
	}
	req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Content: r1.Content},
		model.Message{Role: model.RoleUser, Content: []model.Block{{Type: model.BlockToolResult, ToolUseID: r1.ToolUses()[0].ID}}})
	r2, err := p.Stream(context.Background(), req, nil)
	if err != nil || r2.StopReason != model.StopEndTurn || r2.Content[0].Text != "Done." || r2.Usage.OutputTokens != 2 {
		t.Fatalf("second: %+v %v", r2, err)
	}
	req.Messages = append(req.Messages, model.Message{Role: model.RoleAssistant, Content: r2.Content},
		model.Message{Role: model.RoleUser, Content: []model.Block{model.Text("more")}})
	if _, err := p.Stream(context.Background(), req, nil); !errors.Is(err, model.ErrScriptExhausted) {
		t.Fatalf("third: %v", err)
	}
}

func TestScriptedJSONListAndLoop(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.json")
	if err := os.WriteFile(path, []byte(`[{"text":"one"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := model.LoadScript(path); err != nil {
		t.Fatal(err)
	}
	s, err := model.ParseScript([]byte(`{"loop":true,"turns":[{"text":"a"},{"text":"b"}]}`), ".json")
	if err != nil {
		t.Fatal(err)
	}
	p := model.NewScripted(s)
	msgs := []model.Message{{Role: model.RoleUser}, {Role: model.RoleAssistant}, {Role: model.RoleUser}, {Role: model.RoleAssistant}, {Role: model.RoleUser}}
	r, err := p.Stream(context.Background(), &model.Request{Messages: msgs}, nil)
	if err != nil || r.Content[0].Text != "a" {
		t.Fatalf("%+v %v", r, err)
	}
	if _, err := model.ParseScript([]byte(`{"turns":[]}`), ".json"); err == nil {
		t.Fatal("empty script accepted")
	}
}

func TestScriptedDelayIsInterruptible(t *testing.T) {
	p := model.NewScripted(model.Script{Turns: []model.ScriptTurn{{Text: "slow", DelayMS: 60_000}}})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := p.Stream(ctx, &model.Request{}, nil); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
}

// TestScriptedContinuesPrefill: a turn streams its text in deltas; a
// request that ends with the assistant's partial text (a prefill) gets the
// rest of the turn, not the turn again, and a prefill the turn does not
// begin with fails the call.
func TestScriptedContinuesPrefill(t *testing.T) {
	p := model.NewScripted(model.Script{Turns: []model.ScriptTurn{
		{Deltas: []string{"Hel", "lo, ", "world."}, ToolCalls: []model.ScriptToolCall{{Name: "bash"}}},
	}})
	user := model.Message{Role: model.RoleUser, Content: []model.Block{model.Text("go")}}
	var deltas []string
	var blocks []model.Block
	onBlock := func(b model.Block) error { blocks = append(blocks, b); return nil }
	onDelta := func(d model.Delta) error { deltas = append(deltas, d.Text); return nil }
	r, err := p.StreamPartial(context.Background(), &model.Request{Messages: []model.Message{user}}, onBlock, onDelta)
	if err != nil || r.Content[0].Text != "Hello, world." || strings.Join(deltas, "|") != "Hel|lo, |world." || len(blocks) != 2 {
		t.Fatalf("first call: %+v deltas %q blocks %v err %v", r, deltas, blocks, err)
	}
	deltas, blocks = nil, nil
	prefill := model.Message{Role: model.RoleAssistant, Content: []model.Block{model.Text("Hello")}}
	r, err = p.StreamPartial(context.Background(), &model.Request{Messages: []model.Message{user, prefill}}, onBlock, onDelta)
	if err != nil || len(r.Content) != 2 || r.Content[0].Text != ", world." || r.Content[1].Type != model.BlockToolUse {
		t.Fatalf("continued: %+v err %v", r, err)
	}
	if strings.Join(deltas, "|") != "|, |world." && strings.Join(deltas, "|") != ", |world." {
		t.Fatalf("continued deltas %q", deltas)
	}
	bad := model.Message{Role: model.RoleAssistant, Content: []model.Block{model.Text("Goodbye")}}
	if _, err := p.Stream(context.Background(), &model.Request{Messages: []model.Message{user, bad}}, nil); err == nil {
		t.Fatal("a prefill the turn does not begin with was answered")
	}
}

// TestScriptedAnswersTheGraderApart: a grader's call (Purpose grader) is
// answered from the script's grader turns by the same position rule, so
// an agent's turns and a grader's verdicts do not take each other's place.
func TestScriptedAnswersTheGraderApart(t *testing.T) {
	s, err := model.ParseScript([]byte(`
turns: [{text: "agent"}]
grader:
  - tool_calls: [{name: submit_verdict, input: {result: needs_revision}}]
  - text: "second verdict"
`), ".yaml")
	if err != nil {
		t.Fatal(err)
	}
	p := model.NewScripted(s)
	user := model.Message{Role: model.RoleUser, Content: []model.Block{model.Text("go")}}
	agent, err := p.Stream(context.Background(), &model.Request{Messages: []model.Message{user}}, nil)
	if err != nil || agent.Content[0].Text != "agent" {
		t.Fatalf("agent: %+v %v", agent, err)
	}
	g1, err := p.Stream(context.Background(), &model.Request{Purpose: model.PurposeGrader, Messages: []model.Message{user}}, nil)
	if err != nil || len(g1.ToolUses()) != 1 || g1.ToolUses()[0].Name != "submit_verdict" {
		t.Fatalf("first verdict: %+v %v", g1, err)
	}
	g2, err := p.Stream(context.Background(), &model.Request{Purpose: model.PurposeGrader,
		Messages: []model.Message{user, {Role: model.RoleAssistant, Content: g1.Content}, user}}, nil)
	if err != nil || g2.Content[0].Text != "second verdict" {
		t.Fatalf("second verdict: %+v %v", g2, err)
	}
	if _, err := model.ParseScript([]byte(`{"turns":[{"text":"a"}],"grader":[{"tool_calls":[{}]}]}`), ".json"); err == nil || !strings.Contains(err.Error(), "grader[0].tool_calls[0]") {
		t.Fatalf("a bad grader turn: %v", err)
	}
}
