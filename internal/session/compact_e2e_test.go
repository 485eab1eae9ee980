package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

const summaryText = "SUMMARY: the user sent long notes 1 to 4."

// compactingModel answers a summary request with summaryText and any other
// request with "answer <n>", counting input tokens as a real API would
// (about 4 characters a token), and reporting a cache read.
func compactingModel(t *testing.T) *anthropictest.Server {
	return anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		raw, _ := json.Marshal(r.Messages)
		in := int64(len(raw)+len(r.System)) / 4
		if isSummaryRequest(r) {
			return anthropictest.Turn{Text: summaryText, InputTokens: in, CacheReadTokens: 7}
		}
		return anthropictest.Turn{Text: fmt.Sprintf("answer %d", len(r.Messages)), InputTokens: in, CacheReadTokens: 7}
	})
}

func isSummaryRequest(r anthropictest.Request) bool {
	bs := r.Blocks(len(r.Messages) - 1)
	return strings.Contains(bs[len(bs)-1].Text, "too long for the context window")
}

// longNote is a user message of about 375 tokens.
func longNote(i int) string {
	return fmt.Sprintf("note %d: ", i) + strings.Repeat("lorem ipsum ", 125)
}

// TestLongConversationIsCompacted: a session whose conversation outgrows
// its model's configured window share (4000 tokens, compact_at 0.5) is
// compacted once before the request that would pass 2000 tokens: the model
// summarises the oldest turns, agent.thread_context_compacted records what
// was replaced, the request goes out under the threshold and starts with
// the summary (a prompt-cache breakpoint, as are the system prompt and the
// last tool), later requests keep it, and every original event is still
// listed.
func TestLongConversationIsCompacted(t *testing.T) {
	fake := compactingModel(t)
	c, sid := compactSession(t, fake)
	const turns = 7
	for i := 1; i <= turns; i++ {
		sendText(t, c, sid, longNote(i))
		waitIdles(t, c, sid, i)
	}

	evs := listEvents(t, c, sid)
	var compactions []anthropic.BetaManagedAgentsSessionEventUnion
	users := 0
	for _, ev := range evs {
		switch ev.Type {
		case "agent.thread_context_compacted":
			compactions = append(compactions, ev)
		case "user.message":
			if strings.Contains(ev.RawJSON(), fmt.Sprintf("note %d: ", users+1)) {
				users++
			}
		}
	}
	if users != turns {
		t.Fatalf("%d of the %d user messages are listed whole", users, turns)
	}
	if len(compactions) != 1 {
		t.Fatalf("%d compaction events, want 1", len(compactions))
	}
	var body struct {
		Strategy string `json:"strategy"`
		Replaced struct {
			FirstEventID string `json:"first_event_id"`
			LastEventID  string `json:"last_event_id"`
			Messages     int    `json:"messages"`
		} `json:"replaced"`
		Summary string `json:"summary"`
		Before  int64  `json:"input_tokens_before"`
		After   int64  `json:"input_tokens_after"`
	}
	if err := json.Unmarshal([]byte(compactions[0].RawJSON()), &body); err != nil {
		t.Fatal(err)
	}
	first := evs[0]
	for _, ev := range evs {
		if ev.Type == "user.message" {
			first = ev
			break
		}
	}
	if body.Strategy != "summary" || body.Summary != summaryText || body.Replaced.FirstEventID != first.ID ||
		body.Replaced.LastEventID == "" || body.Replaced.Messages == 0 || body.Before <= 2000 || body.After > 2000 {
		t.Fatalf("compaction event %s", compactions[0].RawJSON())
	}

	// The wire: one summary request, then requests that start with the
	// summary and stay under the threshold.
	reqs := fake.Requests()
	at := -1
	for i, r := range reqs {
		if isSummaryRequest(r) {
			if at >= 0 {
				t.Fatalf("two summary requests (%d and %d)", at, i)
			}
			at = i
		}
	}
	if at < 0 || at == len(reqs)-1 {
		t.Fatalf("no summary request before a turn's request (%d requests)", len(reqs))
	}
	for _, r := range reqs[at+1:] {
		b := r.Blocks(0)[0]
		if !strings.Contains(b.Text, summaryText) || !strings.Contains(string(r.Messages[0].Content), `"cache_control":{"type":"ephemeral"}`) {
			t.Fatalf("request after the compaction starts with %s", r.Messages[0].Content)
		}
		for _, m := range r.Messages {
			if strings.Contains(string(m.Content), "note 1: ") {
				t.Fatal("a compacted turn is still sent")
			}
		}
	}
	if raw, _ := json.Marshal(reqs[at+1].Messages); int64(len(raw)+len(reqs[at+1].System))/4 > 2000 {
		t.Fatalf("the request after the compaction is %d tokens, over the 2000 threshold", len(raw)/4)
	}
	// Prompt caching: the system prompt and the last tool end in a
	// breakpoint on every request.
	for i, r := range reqs {
		if !strings.Contains(string(r.System), `"cache_control":{"type":"ephemeral"}`) ||
			len(r.Tools) == 0 || !strings.Contains(string(r.Tools[len(r.Tools)-1]), `"cache_control":{"type":"ephemeral"}`) {
			t.Fatalf("request %d: system %s tools %s, want cache_control on the system prompt and the last tool", i, r.System, r.Tools)
		}
	}
	// Cache reads are surfaced per request and in the session's usage.
	for _, ev := range evs {
		if ev.Type == "span.model_request_end" && ev.AsSpanModelRequestEnd().ModelUsage.CacheReadInputTokens != 7 {
			t.Fatalf("span end %s, want 7 cache read tokens", ev.RawJSON())
		}
	}
	got, err := c.Beta.Sessions.Get(context.Background(), sid, anthropic.BetaSessionGetParams{})
	if err != nil || got.Usage.CacheReadInputTokens != 7*int64(len(reqs)) {
		t.Fatalf("session usage %+v (%v), want %d cache read tokens (the summary request's included)", got.Usage, err, 7*len(reqs))
	}
}

// compactSession starts a daemon whose claude-* models are fake's with a
// 4000-token window compacted at half, and a session of an agent with a
// custom tool.
func compactSession(t *testing.T, fake *anthropictest.Server) (anthropic.Client, string) {
	t.Helper()
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake",
			ContextWindow: 4000, CompactAt: 0.5}}
	})
	ctx := context.Background()
	c := anthropic.NewClient(option.WithBaseURL(d.URL), option.WithAPIKey(d.AdminKey), option.WithMaxRetries(0))
	agent, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "long", System: anthropic.String("Keep notes."),
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{
			{OfCustom: &anthropic.BetaManagedAgentsCustomToolParams{Name: "lookup", Description: "look up", Type: anthropic.BetaManagedAgentsCustomToolParamsTypeCustom,
				InputSchema: anthropic.BetaManagedAgentsCustomToolInputSchemaParam{Properties: map[string]any{"q": map[string]any{"type": "string"}}}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "long"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agent.ID)}, EnvironmentID: env.ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	return c, s.ID
}

func sendText(t *testing.T, c anthropic.Client, sid, text string) {
	t.Helper()
	_, err := c.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Type:    anthropic.BetaManagedAgentsUserMessageEventParamsTypeUserMessage,
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: text, Type: anthropic.BetaManagedAgentsTextBlockTypeText}}},
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

func listEvents(t *testing.T, c anthropic.Client, sid string) []anthropic.BetaManagedAgentsSessionEventUnion {
	t.Helper()
	var out []anthropic.BetaManagedAgentsSessionEventUnion
	it := c.Beta.Sessions.Events.ListAutoPaging(context.Background(), sid, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(500)})
	for it.Next() {
		out = append(out, it.Current())
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// waitIdles waits until the session has n session.status_idle events and
// is idle.
func waitIdles(t *testing.T, c anthropic.Client, sid string, n int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		seen := 0
		for _, ev := range listEvents(t, c, sid) {
			switch ev.Type {
			case "session.status_idle":
				seen++
			case "session.error":
				t.Fatalf("session.error %s", ev.RawJSON())
			}
		}
		if seen >= n {
			s, err := c.Beta.Sessions.Get(context.Background(), sid, anthropic.BetaSessionGetParams{})
			if err != nil {
				t.Fatal(err)
			}
			if s.Status == "idle" {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s never reached %d idles", sid, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOldToolOutputsAreDroppedFirst: when most of a long conversation is
// tool output, dropping the output of all but the last turns brings the
// request under the threshold: the compaction drops them (no summary
// request), the model sees a placeholder for the old ones and the recent
// ones whole, and the log still lists every result whole.
func TestOldToolOutputsAreDroppedFirst(t *testing.T) {
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		raw, _ := json.Marshal(r.Messages)
		in := int64(len(raw)+len(r.System)) / 4
		if isSummaryRequest(r) {
			return anthropictest.Turn{Text: summaryText, InputTokens: in}
		}
		bs := r.Blocks(len(r.Messages) - 1)
		if bs[0].Type == "tool_result" {
			return anthropictest.Turn{Text: "noted", InputTokens: in}
		}
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "lookup", Input: map[string]any{"q": bs[0].Text}}}, InputTokens: in}
	})
	c, sid := compactSession(t, fake)
	output := func(i int) string { return fmt.Sprintf("output %d: ", i) + strings.Repeat("data ", 300) }
	const rounds = 5
	for i := 1; i <= rounds; i++ {
		sendText(t, c, sid, fmt.Sprintf("look up %d", i))
		waitIdles(t, c, sid, 2*i-1)
		var use string
		for _, ev := range listEvents(t, c, sid) {
			if ev.Type == "agent.custom_tool_use" {
				use = ev.ID
			}
		}
		_, err := c.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{
				Type: anthropic.BetaManagedAgentsUserCustomToolResultEventParamsTypeUserCustomToolResult, CustomToolUseID: use,
				Content: []anthropic.BetaManagedAgentsUserCustomToolResultEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Type: anthropic.BetaManagedAgentsTextBlockTypeText, Text: output(i)}}},
			}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		waitIdles(t, c, sid, 2*i)
	}
	evs := listEvents(t, c, sid)
	var compactions []string
	results := 0
	for _, ev := range evs {
		switch ev.Type {
		case "agent.thread_context_compacted":
			compactions = append(compactions, ev.RawJSON())
		case "user.custom_tool_result":
			if strings.Contains(ev.RawJSON(), output(results+1)) {
				results++
			}
		}
	}
	if results != rounds {
		t.Fatalf("%d of %d tool results listed whole", results, rounds)
	}
	if len(compactions) != 1 || !strings.Contains(compactions[0], `"strategy":"drop_tool_results"`) {
		t.Fatalf("compactions %v, want one that drops tool outputs", compactions)
	}
	reqs := fake.Requests()
	for _, r := range reqs {
		if isSummaryRequest(r) {
			t.Fatal("a summary was asked for although dropping tool outputs was enough")
		}
	}
	last := reqs[len(reqs)-1]
	var texts []string
	for _, b := range last.AllBlocks() {
		if b.Type == "tool_result" {
			texts = append(texts, b.ToolResultText())
		}
	}
	if len(texts) != rounds || !strings.Contains(texts[0], "tool output dropped") || texts[rounds-1] != output(rounds) {
		t.Fatalf("tool results of the last request: %.80q", texts)
	}
}
