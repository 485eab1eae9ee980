package agentkernel_test

import (
	"bytes"
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// BenchmarkSessionFirstToolCall measures the time from session create to
// the first tool call's result, without resources and with a 100 MB file
// and a 1,000-memory read_write store (issue 12's goal: < 300 ms over the
// empty case). The file and the store are made through the SDK and served
// by the daemon's own Files API and memory service.
func BenchmarkSessionFirstToolCall(b *testing.B) {
	fake := anthropictest.New(b, func(r anthropictest.Request) anthropictest.Turn {
		if r.AssistantTurns() == 0 {
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "true"}}}}
		}
		return anthropictest.Turn{Text: "done"}
	})
	d := daemontest.Start(b, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	})
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)
	big := uploadFile(b, c, "big.bin", bytes.Repeat([]byte("0123456789abcdef"), 100<<20/16))
	memories := map[string]string{}
	for i := 0; i < 1000; i++ {
		memories[fmt.Sprintf("/topic-%d/note-%d.md", i%20, i)] = fmt.Sprintf("memory %d: %s\n", i, bytes.Repeat([]byte("x"), 200))
	}
	// One store for every session (1,000 memories made through the SDK
	// take a while): each session mounts it read_write and syncs nothing.
	store, _ := newMemoryStore(b, c, "bench", memories)
	ag, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "bench", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}}})
	if err != nil {
		b.Fatal(err)
	}
	env := newEnv(b, c, "bench")
	for _, tc := range []struct {
		name      string
		resources func() []anthropic.BetaSessionNewParamsResourceUnion
	}{
		{"empty", func() []anthropic.BetaSessionNewParamsResourceUnion { return nil }},
		{"file=100MB,memories=1000", func() []anthropic.BetaSessionNewParamsResourceUnion {
			return []anthropic.BetaSessionNewParamsResourceUnion{
				{OfFile: &anthropic.BetaManagedAgentsFileResourceParams{Type: "file", FileID: big}},
				{OfMemoryStore: &anthropic.BetaManagedAgentsMemoryStoreResourceParam{Type: "memory_store", MemoryStoreID: store}},
			}
		}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			var all []time.Duration
			for i := 0; i < b.N; i++ {
				rs := tc.resources()
				sctx, cancel := context.WithCancel(ctx)
				start := time.Now()
				s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
					Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(ag.ID)}, EnvironmentID: env.ID, Resources: rs})
				if err != nil {
					b.Fatal(err)
				}
				stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
				if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("go")}}); err != nil {
					b.Fatal(err)
				}
				for stream.Next() {
					ev := stream.Current()
					if ev.Type == "agent.tool_result" {
						if ev.AsAgentToolResult().IsError {
							b.Fatalf("tool result %s", ev.RawJSON())
						}
						all = append(all, time.Since(start))
					}
					if ev.Type == "session.error" {
						b.Fatalf("session.error %s", ev.RawJSON())
					}
					if ev.Type == "session.status_idle" {
						break
					}
				}
				stream.Close()
				cancel()
				if _, err := c.Beta.Sessions.Delete(ctx, s.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
					b.Fatal(err)
				}
			}
			sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(all[len(all)-1].Microseconds())/1000, "max-ms")
			b.ReportMetric(0, "ns/op")
		})
	}
}
