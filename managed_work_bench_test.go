package agentkernel_test

import (
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// BenchmarkToolCallThroughWorkQueue: one bash call ("true") per turn, run
// in the daemon's own sandbox (local) or by the SDK's environment worker
// through the work queue (self_hosted). ns/op is the whole turn (two
// requests to the in-process fake model); tool-ms/op is the call alone:
// from its agent.tool_use to its result event, as the log stamps them.
//
//	go test -run '^$' -bench BenchmarkToolCallThroughWorkQueue -benchtime 30x .
func BenchmarkToolCallThroughWorkQueue(b *testing.B) {
	play := func(r anthropictest.Request) anthropictest.Turn {
		for _, bl := range r.Blocks(len(r.Messages) - 1) {
			if bl.Type == "tool_result" {
				return anthropictest.Turn{Text: "ok"}
			}
		}
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "true"}}}}
	}
	for _, mode := range []string{"local", "work_queue"} {
		b.Run(mode, func(b *testing.B) {
			h := newSelfHosted(b, play)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			envID := h.env.ID
			if mode == "local" {
				envID = newEnv(b, h.c, "local").ID
			} else {
				done := make(chan error, 1)
				go func() { done <- sdkWorker(h, b.TempDir(), io.Discard).Run(ctx) }()
				defer func() { cancel(); <-done }()
			}
			s := newSession(b, h.c, h.agent.ID, envID)
			turn := func() {
				before := countEvents(h.c, s.ID, "session.status_idle")
				if _, err := h.c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("go")}}); err != nil {
					b.Fatal(err)
				}
				// Two idles per turn when a worker answers (requires_action, end_turn), one locally.
				want := before + 1
				if mode == "work_queue" {
					want = before + 2
				}
				deadline := time.Now().Add(60 * time.Second)
				for countEvents(h.c, s.ID, "session.status_idle") < want {
					if time.Now().After(deadline) {
						b.Fatal("the turn did not end")
					}
					time.Sleep(2 * time.Millisecond)
				}
			}
			turn() // the sandbox (or the worker's claim) is made here, not timed
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				turn()
			}
			b.StopTimer()
			var total time.Duration
			var n int
			var used time.Time
			pager := h.c.Beta.Sessions.Events.ListAutoPaging(ctx, s.ID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
			skip := true
			for pager.Next() {
				ev := pager.Current()
				switch {
				case ev.Type == "agent.tool_use":
					used = ev.ProcessedAt
				case ev.Type == "agent.tool_result" || ev.Type == "user.tool_result":
					if skip { // the untimed first turn
						skip = false
						continue
					}
					total += ev.ProcessedAt.Sub(used)
					n++
				case strings.HasPrefix(ev.Type, "session.error"):
					b.Fatalf("session.error %s", ev.RawJSON())
				}
			}
			if n > 0 {
				b.ReportMetric(float64(total.Microseconds())/1000/float64(n), "tool-ms/op")
			}
		})
	}
}
