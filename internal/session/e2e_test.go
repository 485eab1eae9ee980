package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestSDKEndToEnd drives a real daemon with anthropic-sdk-go's Beta client,
// its anthropic provider pointed at an in-process fake Messages API: the
// model writes a file with bash, reads it back with read, and ends its
// turn; then a custom tool round trip, an interrupt mid-stream, a message
// queued during a turn, and destroy.
func TestSDKEndToEnd(t *testing.T) {
	release := make(chan struct{})
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		blocks := r.Blocks(len(r.Messages) - 1)
		last := blocks[len(blocks)-1].Text
		switch {
		case strings.Contains(last, "write a file") && r.AssistantTurns() == 0:
			return anthropictest.Turn{Text: "Writing.", ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo e2e-content > e2e.txt"}}}}
		case r.AssistantTurns() == 1 && strings.Contains(string(r.Messages[0].Content), "write a file"):
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "read", Input: map[string]any{"file_path": "e2e.txt"}}}}
		case last == "weather?":
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "get_weather", Input: map[string]any{"city": "Oslo"}}}}
		case last == "hang":
			return anthropictest.Turn{Text: "slowly...", Hang: true}
		case last == "first":
			<-release
			return anthropictest.Turn{Text: "one"}
		}
		return anthropictest.Turn{Text: "done"}
	})
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	})
	ctx := context.Background()
	c := anthropic.NewClient(option.WithBaseURL(d.URL), option.WithAPIKey(d.AdminKey), option.WithMaxRetries(0))
	agent, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name:  "e2e",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{
			{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}},
			{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{Name: "get_weather", Description: "weather", Type: anthropic.BetaManagedAgentsCustomToolParamsTypeCustom,
				InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "e2e"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agent.ID)}, EnvironmentID: env.ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	var seen []anthropic.BetaManagedAgentsStreamSessionEventsUnion
	next := func(typ string) anthropic.BetaManagedAgentsStreamSessionEventsUnion {
		t.Helper()
		for stream.Next() {
			ev := stream.Current()
			seen = append(seen, ev)
			if ev.Type == typ {
				return ev
			}
		}
		t.Fatalf("stream ended waiting for %s: %v", typ, stream.Err())
		return anthropic.BetaManagedAgentsStreamSessionEventsUnion{}
	}
	send := func(evs ...anthropic.BetaManagedAgentsEventParamsUnion) {
		t.Helper()
		if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	say := func(text string) anthropic.BetaManagedAgentsEventParamsUnion {
		return anthropic.BetaManagedAgentsEventParamsUnion{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Type: anthropic.BetaManagedAgentsUserMessageEventParamsTypeUserMessage,
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{
				OfText: &anthropic.BetaManagedAgentsTextBlockParam{Type: anthropic.BetaManagedAgentsTextBlockTypeText, Text: text},
			}},
		}}
	}

	// 1. bash writes, read reads back, the results reach the model, end_turn.
	send(say("write a file and read it back"))
	next("session.status_running")
	if u := next("agent.tool_use").AsAgentToolUse(); u.Name != "bash" {
		t.Fatalf("first tool %s", u.Name)
	}
	if r := next("agent.tool_result").AsAgentToolResult(); r.IsError {
		t.Fatalf("bash failed: %s", r.RawJSON())
	}
	next("agent.tool_use")
	res := next("agent.tool_result").AsAgentToolResult()
	if res.IsError || !strings.Contains(res.RawJSON(), "e2e-content") {
		t.Fatalf("read result %s", res.RawJSON())
	}
	next("agent.message")
	if end := next("span.model_request_end").AsSpanModelRequestEnd(); end.ModelUsage.InputTokens == 0 {
		t.Fatalf("span usage %s", end.RawJSON())
	}
	if idle := next("session.status_idle").AsSessionStatusIdle(); idle.StopReason.Type != "end_turn" {
		t.Fatalf("idle %s", idle.RawJSON())
	}
	reqs := fake.Requests()
	found := false
	for _, b := range reqs[len(reqs)-1].AllBlocks() {
		found = found || (b.Type == "tool_result" && strings.Contains(b.ToolResultText(), "e2e-content"))
	}
	if !found {
		t.Fatal("the read result did not reach the model")
	}
	got, err := c.Beta.Sessions.Get(ctx, s.ID, anthropic.BetaSessionGetParams{})
	if err != nil || got.Status != "idle" || got.Usage.InputTokens == 0 {
		t.Fatalf("session after turn: %v %v", got, err)
	}

	// 2. Custom tool: requires_action, then user.custom_tool_result resumes.
	send(say("weather?"))
	use := next("agent.custom_tool_use").AsAgentCustomToolUse()
	if idle := next("session.status_idle").AsSessionStatusIdle(); idle.StopReason.Type != "requires_action" || len(idle.StopReason.EventIDs) != 1 || idle.StopReason.EventIDs[0] != use.ID {
		t.Fatalf("requires_action idle %s", idle.RawJSON())
	}
	send(anthropic.BetaManagedAgentsEventParamsUnion{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{
		Type: anthropic.BetaManagedAgentsUserCustomToolResultEventParamsTypeUserCustomToolResult, CustomToolUseID: use.ID,
		Content: []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Type: anthropic.BetaManagedAgentsTextBlockTypeText, Text: "cold"}}},
	}})
	if idle := next("session.status_idle").AsSessionStatusIdle(); idle.StopReason.Type != "end_turn" {
		t.Fatalf("after custom result %s", idle.RawJSON())
	}

	// 3. Interrupt mid-stream.
	send(say("hang"))
	<-fake.Hanging
	send(anthropic.BetaManagedAgentsEventParamsUnion{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{Type: anthropic.BetaManagedAgentsUserInterruptEventParamsTypeUserInterrupt}})
	next("session.status_idle")

	// 4. A message sent during a turn is answered next, in order.
	send(say("first"))
	next("session.status_running")
	send(say("second"))
	close(release)
	next("session.status_idle")
	next("session.status_running")
	next("session.status_idle")
	last := fake.Requests()[len(fake.Requests())-1].AllBlocks()
	if txt := last[len(last)-1].Text; txt != "second" {
		t.Fatalf("queued message answered out of order: last block %q", txt)
	}
	running, idle := 0, 0
	for _, ev := range seen {
		switch ev.Type {
		case "session.status_running":
			running++
		case "session.status_idle":
			idle++
		}
	}
	if running != idle || running != 6 {
		t.Fatalf("running %d / idle %d", running, idle)
	}

	// 5. Destroy; the terminated session rejects events.
	sbxCount := len(mustList(t, d))
	if _, err := c.Beta.Sessions.Delete(ctx, s.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	_, err = c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{say("hello?")}})
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode/100 != 4 {
		t.Fatalf("event to a destroyed session: %v", err)
	}
	if sbxCount != 1 || len(mustList(t, d)) != 0 {
		t.Fatalf("sandboxes before/after destroy: %d/%d", sbxCount, len(mustList(t, d)))
	}
}

// mustList lists the live sandboxes.
func mustList(t *testing.T, d *daemontest.Daemon) []string {
	t.Helper()
	list, err := d.Sandboxes().List(context.Background(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, in := range list {
		if in.State != "destroyed" {
			out = append(out, in.ID)
		}
	}
	return out
}
