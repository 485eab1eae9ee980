package guest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkAgentEventRelay is the guest's half of the relay: an agent posts
// batches of 100 events (persisted to the workspace file before the answer)
// and the daemon's pull acknowledges and takes them.
func BenchmarkAgentEventRelay(b *testing.B) {
	c, _ := startGuestB(b)
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

// startGuestB is startGuest for benchmarks.
func startGuestB(b *testing.B) (*Client, string) {
	b.Helper()
	dir := b.TempDir()
	work := filepath.Join(dir, "workspace")
	if err := os.Mkdir(work, 0o755); err != nil {
		b.Fatal(err)
	}
	srv, err := NewServer(Config{SocketPath: filepath.Join(dir, "guest.sock"), StateDir: filepath.Join(dir, "state"), WorkDir: work})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx) }()
	c := NewClient(filepath.Join(dir, "guest.sock"))
	b.Cleanup(func() {
		c.Close()
		cancel()
		<-errc
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		if _, err := c.Health(ctx); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("guest did not come up")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c, work
}
