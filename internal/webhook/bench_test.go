package webhook

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/postgres"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// BenchmarkDelivery100Sessions: 100 sessions append status events
// concurrently (10 per session: 5 turns' status_running and status_idle);
// a local receiver records when each arrives. Reported: event→receiver
// latency p50/p99 (from the event's stored created_at to its arrival) and
// deliveries per second. "burst" appends as fast as the store takes them
// (throughput; latency is mostly queueing), "paced" has each session
// append one event every 500 ms (200 events/s offered: latency).
func BenchmarkDelivery100Sessions(b *testing.B) {
	for _, pace := range []struct {
		name  string
		every time.Duration
	}{{"burst", 0}, {"paced", 500 * time.Millisecond}} {
		b.Run("sqlite/"+pace.name, func(b *testing.B) {
			st, err := sqlite.Open(context.Background(), filepath.Join(b.TempDir(), "state.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			benchDelivery(b, st, pace.every)
		})
		b.Run("postgres/"+pace.name, func(b *testing.B) {
			if os.Getenv("AGENTKERNEL_TEST_POSTGRES_URL") == "" {
				b.Skip("AGENTKERNEL_TEST_POSTGRES_URL is not set")
			}
			st, err := postgres.Open(context.Background(), testenv.FreshPostgres(b, "akwh"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			benchDelivery(b, st, pace.every)
		})
	}
}

func benchDelivery(b *testing.B, st store.Store, every time.Duration) {
	const sessions, turns = 100, 5
	ctx := context.Background()
	var (
		mu   sync.Mutex
		lats []time.Duration
		got  int
		all  = make(chan struct{}, 1)
		want int
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		now := time.Now()
		body, _ := io.ReadAll(r.Body)
		var ev struct {
			CreatedAt time.Time `json:"created_at"`
		}
		_ = json.Unmarshal(body, &ev)
		mu.Lock()
		lats = append(lats, now.Sub(ev.CreatedAt))
		got++
		if got == want {
			all <- struct{}{}
		}
		mu.Unlock()
	}))
	defer srv.Close()
	svc := New(Config{Store: st, AllowLoopback: true, Concurrency: 32})
	if err := svc.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer svc.Stop()
	tenant := "tnt_bench"
	if _, err := svc.Create(ctx, tenant, CreateParams{URL: srv.URL, EventTypes: []string{
		store.WebhookSessionStatusRunStarted, store.WebhookSessionStatusIdled}}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var elapsed time.Duration
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		ids := make([]string, sessions)
		for j := range ids {
			s, err := st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: tenant})
			if err != nil {
				b.Fatal(err)
			}
			ids[j] = s.ID
		}
		mu.Lock()
		got, want = 0, sessions*turns*2
		mu.Unlock()
		b.StartTimer()
		start := time.Now()
		var wg sync.WaitGroup
		for j, id := range ids {
			wg.Add(1)
			go func(j int) {
				defer wg.Done()
				if every > 0 {
					// Spread the sessions over the period.
					time.Sleep(every * time.Duration(j) / sessions)
				}
				for range turns {
					for _, typ := range []string{"session.status_running", "session.status_idle"} {
						if every > 0 {
							time.Sleep(every)
						}
						if _, err := st.AppendEvents(ctx, id, []store.NewEvent{{Type: typ}}); err != nil {
							b.Error(err)
							return
						}
					}
				}
			}(j)
		}
		wg.Wait()
		select {
		case <-all:
		case <-time.After(5 * time.Minute):
			b.Fatalf("received %d of %d deliveries", got, want)
		}
		elapsed += time.Since(start)
	}
	b.StopTimer()
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(lats)
	pct := func(p float64) time.Duration { return lats[int(p*float64(len(lats)-1))] }
	b.ReportMetric(float64(pct(0.50).Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(pct(0.99).Microseconds())/1000, "p99_ms")
	b.ReportMetric(float64(len(lats))/elapsed.Seconds(), "deliveries/s")
	b.ReportMetric(0, "ns/op")
}

// BenchmarkOutboxAppend is the outbox's price on the event append path
// (SQLite, serial appends of one event): an event no webhook announces
// (agent.message: no extra query), a status event of a tenant without
// endpoints (one indexed read), and one with a subscribed endpoint (the
// read and an outbox row). The delivery loop is not running.
func BenchmarkOutboxAppend(b *testing.B) {
	for _, c := range []struct {
		name, typ string
		endpoint  bool
	}{{"agent.message", "agent.message", false}, {"status/no-endpoint", "session.status_idle", false},
		{"status/subscribed", "session.status_idle", true}} {
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			st, err := sqlite.Open(ctx, filepath.Join(b.TempDir(), "state.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			if c.endpoint {
				if _, err := New(Config{Store: st}).Create(ctx, "tnt_bench", CreateParams{URL: "https://hooks.example.com",
					EventTypes: []string{store.WebhookSessionStatusIdled}}); err != nil {
					b.Fatal(err)
				}
			}
			s, err := st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: "tnt_bench"})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			for range b.N {
				if _, err := st.AppendEvents(ctx, s.ID, []store.NewEvent{{Type: c.typ}}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
