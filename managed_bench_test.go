package agentkernel_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/store"
)

// BenchmarkManagedEventStream measures the session event path end to end:
// events appended through the daemon's event log (as the runtime appends
// them: durable in the store before anyone sees them) and delivered to one
// SSE subscriber per session over real HTTP. b.N is the total number of
// events; each append carries one event. Reported: events/s appended and
// delivered, and p50/p99 from the start of Append to the SSE client
// reading the event.
//
//	go test -run '^$' -bench BenchmarkManagedEventStream -benchtime 20000x .
func BenchmarkManagedEventStream(b *testing.B) {
	for _, sessions := range []int{1, 100} {
		for _, batch := range []int{1, 10} {
			b.Run(fmt.Sprintf("sessions=%d/batch=%d", sessions, batch), func(b *testing.B) { benchEventStream(b, sessions, batch) })
		}
	}
}

func benchEventStream(b *testing.B, sessions, batch int) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := daemontest.Start(b)
	c := sdkClient(d, d.AdminKey)
	agent, env := newAgent(b, c, "bench").ID, newEnv(b, c, "bench").ID
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = newSession(b, c, agent, env).ID
	}
	perSession := max(1, b.N/sessions)
	perSession = (perSession + batch - 1) / batch * batch
	total := perSession * sessions

	// One SSE subscriber per session, connected before the clock starts.
	lat := make([][]time.Duration, sessions)
	var readers sync.WaitGroup
	ready := make(chan struct{}, sessions)
	for i, id := range ids {
		req, _ := http.NewRequestWithContext(ctx, "GET", d.URL+"/v1/sessions/"+id+"/events/stream", nil)
		req.Header.Set("x-api-key", d.AdminKey)
		resp, err := http.DefaultClient.Do(req)
		if err != nil || resp.StatusCode != 200 {
			b.Fatalf("stream: %v %v", resp, err)
		}
		readers.Add(1)
		go func() {
			defer readers.Done()
			defer resp.Body.Close()
			st := &sse{resp: resp, sc: bufio.NewScanner(resp.Body)}
			ready <- struct{}{}
			out := make([]time.Duration, 0, perSession)
			for len(out) < perSession && st.sc.Scan() {
				line := st.sc.Text()
				if !strings.HasPrefix(line, "data: ") {
					continue
				}
				now := time.Now()
				var ev struct {
					Sent int64 `json:"sent"`
				}
				if json.Unmarshal([]byte(line[6:]), &ev) == nil && ev.Sent > 0 {
					out = append(out, now.Sub(time.Unix(0, ev.Sent)))
				}
			}
			lat[i] = out
		}()
	}
	for range sessions {
		<-ready
	}
	events := d.Events()
	b.ResetTimer()
	start := time.Now()
	var writers sync.WaitGroup
	for _, id := range ids {
		writers.Add(1)
		go func() {
			defer writers.Done()
			for n := 0; n < perSession; n += batch {
				evs := make([]store.NewEvent, batch)
				sent := strconv.FormatInt(time.Now().UnixNano(), 10)
				for k := range evs {
					evs[k] = store.NewEvent{Type: "agent.message",
						Data: json.RawMessage(`{"type":"agent.message","content":[{"type":"text","text":"benchmark event"}],"sent":` + sent + `}`)}
				}
				if _, err := events.Append(ctx, id, evs); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	writers.Wait()
	appended := time.Since(start)
	readers.Wait()
	elapsed := time.Since(start)
	b.StopTimer()

	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	if len(all) != total {
		b.Fatalf("delivered %d of %d events", len(all), total)
	}
	slices.Sort(all)
	b.ReportMetric(float64(total)/appended.Seconds(), "appended/s")
	b.ReportMetric(float64(total)/elapsed.Seconds(), "delivered/s")
	b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
	b.ReportMetric(0, "ns/op")
}
