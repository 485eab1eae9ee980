package crashtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// TestBenchDaemonRSS reports the daemon's resident memory (VmRSS) with N
// hibernated objects and N idle sessions. They are written straight into
// the store (the API path would take hours at 10,000), then the daemon is
// restarted on it and made to hold them as production does: every object
// and session is listed through the API, every object is touched (a
// hibernate request, which gives it its in-memory actor as a call would),
// and every session is woken (a user.interrupt with no turn running: its
// worker folds the conversation and stays for IdleWorker, as after a
// turn). It is a measurement, not a check: it runs only when
// AGENTKERNEL_BENCH_RSS is set (to N, default 1000).
//
//	AGENTKERNEL_BENCH_RSS=10000 go test -count=1 -run TestBenchDaemonRSS -v -timeout 30m ./internal/session/crashtest/
func TestBenchDaemonRSS(t *testing.T) {
	v := os.Getenv("AGENTKERNEL_BENCH_RSS")
	if v == "" {
		t.Skip("AGENTKERNEL_BENCH_RSS is not set")
	}
	count, err := strconv.Atoi(v)
	if err != nil || count <= 0 {
		count = 1000
	}
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn { return anthropictest.Turn{Text: "ok"} })
	n := newNode(t, "sqlite", fake.URL)
	n.start()
	tmpl := newSession(t, n.client())
	n.stop()

	ctx := context.Background()
	setup := time.Now()
	st, err := sqlite.Open(ctx, filepath.Join(n.home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	s0, err := st.GetManagedSession(ctx, tmpl)
	if err != nil {
		t.Fatal(err)
	}
	tenant := s0.TenantID
	if _, err := st.PutObjectClass(ctx, &store.ObjectClass{TenantID: tenant, Class: "counter",
		InitCommand: []string{"/bin/true"}, MaxConcurrency: 1, StorageMode: "snapshot", IdleTimeoutSeconds: 60}); err != nil {
		t.Fatal(err)
	}
	text := func(typ, s string) json.RawMessage {
		b, _ := json.Marshal(map[string]any{"type": typ, "content": []map[string]any{{"type": "text", "text": s}}})
		return b
	}
	for i := 0; i < count; i++ {
		// An idle session that ran one turn, as the API leaves it.
		s, err := st.CreateManagedSession(ctx, &store.ManagedSession{TenantID: tenant, AgentID: s0.AgentID,
			AgentVersion: s0.AgentVersion, EnvironmentID: s0.EnvironmentID, Doc: s0.Doc})
		if err != nil {
			t.Fatal(err)
		}
		evs, err := st.AppendEvents(ctx, s.ID, []store.NewEvent{
			{Type: "user.message", Data: text("user.message", fmt.Sprintf("question %d: what is the answer?", i))},
			{Type: "session.status_running", Data: json.RawMessage(`{"type":"session.status_running"}`)},
		})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := st.InsertRunRow(ctx, &store.RunRow{SessionID: s.ID, TurnSeq: evs[0].Seq, Owner: "bench/boot",
			LeaseExpiresAt: time.Now().Add(time.Hour), LastProgressSeq: evs[1].Seq}); err != nil {
			t.Fatal(err)
		}
		if _, _, err := st.EndTurn(ctx, store.EndTurn{SessionID: s.ID, Owner: "bench/boot", Status: store.RunCompleted,
			StopReason: json.RawMessage(`{"type":"end_turn"}`), ProcessedSeq: evs[1].Seq,
			Events: []store.NewEvent{
				{Type: "agent.message", Data: text("agent.message", fmt.Sprintf("the answer to question %d is 42.", i))},
				{Type: "session.status_idle", Data: json.RawMessage(`{"type":"session.status_idle","stop_reason":{"type":"end_turn"}}`)},
			}}); err != nil {
			t.Fatal(err)
		}
		// A hibernated object with a little storage and the cold sandbox
		// it last ran in.
		sb, err := st.CreateSandbox(ctx, &store.Sandbox{TenantID: tenant, Driver: "bwrap", Image: "default",
			SleepAfter: time.Minute, Metadata: map[string]string{"agentkernel.object": fmt.Sprintf("counter/obj%05d", i)},
			LastActivityAt: time.Now()})
		if err != nil {
			t.Fatal(err)
		}
		key := store.ObjectKey{TenantID: tenant, Class: "counter", ID: fmt.Sprintf("obj%05d", i)}
		if _, err := st.CreateObject(ctx, &store.Object{ObjectKey: key, Status: store.ObjectActive, SandboxID: sb.ID}); err != nil {
			t.Fatal(err)
		}
		if _, err := st.HibernateObject(ctx, key, map[string]json.RawMessage{"count": json.RawMessage(strconv.Itoa(i)),
			"owner": json.RawMessage(`"user-` + strconv.Itoa(i) + `"`)}); err != nil {
			t.Fatal(err)
		}
	}
	st.Close()
	t.Logf("%d sessions and %d objects written in %s", count, count, time.Since(setup).Round(time.Millisecond))

	n.start()
	defer n.stop()
	pid := n.cmd.Process.Pid
	report := func(phase string) {
		t.Helper()
		time.Sleep(2 * time.Second) // let the daemon settle (background GC)
		m := metrics(t, n)
		t.Logf("%-52s VmRSS %6.1f MiB (anon %6.1f, file %5.1f)  VmHWM %6.1f MiB  heap in use %6.1f MiB  stacks %5.1f MiB  goroutines %6.0f",
			phase, rss(t, pid, "VmRSS"), rss(t, pid, "RssAnon"), rss(t, pid, "RssFile"), rss(t, pid, "VmHWM"),
			m["go_memstats_heap_inuse_bytes"]/(1<<20), m["go_memstats_stack_inuse_bytes"]/(1<<20), m["go_goroutines"])
	}
	report("restarted")

	// Listed through the API, every page.
	sessions := listAll(t, n, "/v1/sessions?limit=100")
	objects := listAll(t, n, "/v1/objects?limit=100")
	if len(sessions) < count || len(objects) < count {
		t.Fatalf("listed %d sessions and %d objects, want %d each", len(sessions), len(objects), count)
	}
	report(fmt.Sprintf("listed %d sessions and %d objects", len(sessions), len(objects)))

	parallel(t, count, func(i int) error {
		return post(n, fmt.Sprintf("/v1/objects/counter/obj%05d/hibernate", i), `{}`)
	})
	report(fmt.Sprintf("%d hibernated objects touched", count))

	parallel(t, len(sessions), func(i int) error {
		return post(n, "/v1/sessions/"+sessions[i]+"/events?beta=true", `{"events":[{"type":"user.interrupt"}]}`)
	})
	report(fmt.Sprintf("%d idle sessions woken (workers folded them)", len(sessions)))
}

// rss reads a VmRSS-like field of /proc/<pid>/status in MiB.
func rss(t *testing.T, pid int, field string) float64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if name, rest, ok := strings.Cut(sc.Text(), ":"); ok && name == field {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 64)
			if err != nil {
				t.Fatal(err)
			}
			return kb / 1024
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// metrics reads the daemon's unlabelled Prometheus gauges.
func metrics(t *testing.T, n *node) map[string]float64 {
	t.Helper()
	resp, err := http.Get(n.url() + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || strings.Contains(line, "{") {
			continue
		}
		if name, val, ok := strings.Cut(line, " "); ok {
			if f, err := strconv.ParseFloat(val, 64); err == nil {
				out[name] = f
			}
		}
	}
	return out
}

func call(n *node, method, path, body string) ([]byte, error) {
	req, err := http.NewRequest(method, n.url()+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("x-api-key", n.key)
	req.Header.Set("content-type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		return nil, fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b, nil
}

func post(n *node, path, body string) error {
	_, err := call(n, http.MethodPost, path, body)
	return err
}

// listAll pages through a listing and returns every item's id: cursor
// pages (next_page) or, for objects, has_more with after=class/id.
func listAll(t *testing.T, n *node, path string) []string {
	t.Helper()
	var ids []string
	next := ""
	for {
		b, err := call(n, http.MethodGet, path+next, "")
		if err != nil {
			t.Fatal(err)
		}
		var page struct {
			Data []struct {
				ID    string `json:"id"`
				Class string `json:"class"`
			} `json:"data"`
			NextPage *string `json:"next_page"`
			HasMore  bool    `json:"has_more"`
		}
		if err := json.Unmarshal(b, &page); err != nil {
			t.Fatal(err)
		}
		for _, d := range page.Data {
			ids = append(ids, d.ID)
		}
		switch {
		case page.NextPage != nil && *page.NextPage != "":
			next = "&page=" + *page.NextPage
		case page.HasMore && len(page.Data) > 0:
			last := page.Data[len(page.Data)-1]
			next = "&after=" + last.Class + "/" + last.ID
		default:
			return ids
		}
	}
}

// parallel runs fn for 0..count-1 on a few goroutines and fails on the
// first error.
func parallel(t *testing.T, count int, fn func(i int) error) {
	t.Helper()
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		next int
		ferr error
	)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				stop := ferr != nil
				mu.Unlock()
				if i >= count || stop {
					return
				}
				if err := fn(i); err != nil {
					mu.Lock()
					ferr = err
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if ferr != nil {
		t.Fatal(ferr)
	}
}
