package session

import (
	"context"
	"encoding/json"
	"path/filepath"
	"sort"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/mcp"
	"github.com/agentkernel/agentkernel/internal/mcp/mcptest"
	"github.com/agentkernel/agentkernel/internal/model"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// BenchmarkMCPCallOverhead measures, in one run, an MCP tool call made
// directly with the client (one connection, as a turn holds) and the same
// call made by the turn loop: from agent.mcp_tool_use to
// agent.mcp_tool_result, which adds the op journal's started and
// completed rows and the result event (SQLite). It also reports what each
// turn pays up front: connecting to the server and listing its tools.
//
//	go test -run '^$' -bench MCPCallOverhead -benchtime 200x ./internal/session/
func BenchmarkMCPCallOverhead(b *testing.B) {
	ctx := context.Background()
	srv := mcptest.New(b, mcptest.Options{Token: mcpToken})
	fake := anthropictest.New(b, mcpModel)
	st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	log := NewEventLog(st, EventLogConfig{})
	defer log.Close()
	reg, err := model.NewRegistry(model.RegistryConfig{Routes: []model.Route{{Pattern: "claude-*", Provider: model.ProviderAnthropic, APIKey: "sk-fake", BaseURL: fake.URL}}, Environ: []string{}})
	if err != nil {
		b.Fatal(err)
	}
	rt, err := NewRuntime(RuntimeConfig{Store: st, Events: log, Models: reg, Owner: "bench/boot", MCPAuth: &fakeVaults{url: srv.URL}})
	if err != nil {
		b.Fatal(err)
	}
	if err := rt.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer rt.Stop()
	e := &rtEnv{st: st, log: log, rt: rt, fake: fake}
	s := e.mcpSession(b, srv.URL, allowAll)
	events, err := log.Subscribe(ctx, s.ID, 0)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := mcp.Connect(ctx, srv.URL, mcp.Options{Token: mcpToken})
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	input := json.RawMessage(`{"text":"x"}`)
	var direct, loop, setup []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := conn.Call(ctx, "echo", input); err != nil {
			b.Fatal(err)
		}
		direct = append(direct, time.Since(t0))
		if _, err := log.Append(ctx, s.ID, []store.NewEvent{newEvent(EventUserMessage, map[string]any{"content": textContent("echo:x")})}); err != nil {
			b.Fatal(err)
		}
		rt.Wake(s.ID)
		var running, span, use time.Time
		for ev := range events {
			switch ev.Type {
			case EventStatusRunning:
				running = ev.CreatedAt
			case EventSpanModelStart:
				if span.IsZero() {
					span = ev.CreatedAt
				}
			case EventAgentMCPToolUse:
				use = ev.CreatedAt
			case EventAgentMCPToolResult:
				loop = append(loop, ev.CreatedAt.Sub(use))
			}
			if ev.Type == EventStatusIdle {
				break
			}
		}
		setup = append(setup, span.Sub(running))
	}
	b.StopTimer()
	p := func(d []time.Duration, q float64) float64 {
		sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
		return float64(d[int(q*float64(len(d)-1))].Microseconds())
	}
	b.ReportMetric(p(direct, 0.5), "µs/call-direct-p50")
	b.ReportMetric(p(loop, 0.5), "µs/call-turn-p50")
	b.ReportMetric(p(direct, 0.99), "µs/call-direct-p99")
	b.ReportMetric(p(loop, 0.99), "µs/call-turn-p99")
	b.ReportMetric(p(loop, 0.5)/p(direct, 0.5), "ratio-p50")
	b.ReportMetric(p(setup, 0.5), "µs/turn-connect+list-p50")
}
