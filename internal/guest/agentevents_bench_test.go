package guest

import (
	"context"
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkAgentEventRelay is the guest's half of the relay: an agent posts
// batches of 100 events (persisted to the workspace file before the answer)
// and the daemon's pull acknowledges and takes them.
func BenchmarkAgentEventRelay(b *testing.B) {
	c, _ := startGuest(b, nil)
	ctx := context.Background()
	evs := make([]AgentEvent, 100)
	for i := range evs {
		evs[i] = AgentEvent{Type: "agent.tool_use", Data: json.RawMessage(`{"tool":"bash","input":"ls -la"}`)}
	}
	var after int64
	n := 0
	start := time.Now()
	for b.Loop() {
		if _, err := c.PostAgentEvents(ctx, evs); err != nil {
			b.Fatal(err)
		}
		got, err := c.PullAgentEvents(ctx, after, 0)
		if err != nil || len(got) != 100 {
			b.Fatalf("pull: %d %v", len(got), err)
		}
		after = got[len(got)-1].Seq
		n += len(got)
	}
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "events/s")
}
