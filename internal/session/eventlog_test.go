package session_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// newManagedStore opens a real SQLite store with one managed session per id.
func newManagedStore(t testing.TB, sessionIDs ...string) store.ManagedStore {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, id := range sessionIDs {
		if _, err := st.CreateManagedSession(ctx, &store.ManagedSession{ID: id, TenantID: "t", AgentID: "agent_1", AgentVersion: 1,
			EnvironmentID: "env_1", Doc: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func msgs(from, n int) []store.NewEvent {
	evs := make([]store.NewEvent, n)
	for i := range evs {
		evs[i] = store.NewEvent{Type: "user.message", Data: json.RawMessage(fmt.Sprintf(`{"type":"user.message","content":[{"type":"text","text":"m%d"}]}`, from+i))}
	}
	return evs
}

// collect reads n events or fails after a generous deadline (a hang, not a
// timing threshold).
func collect(t *testing.T, ch <-chan store.SessionEvent, n int) []store.SessionEvent {
	t.Helper()
	var got []store.SessionEvent
	deadline := time.After(30 * time.Second)
	for len(got) < n {
		select {
		case e, ok := <-ch:
			if !ok {
				t.Fatalf("channel closed after %d of %d events", len(got), n)
			}
			got = append(got, e)
		case <-deadline:
			t.Fatalf("got %d of %d events", len(got), n)
		}
	}
	return got
}

func checkSeqs(t *testing.T, got []store.SessionEvent, first int64) {
	t.Helper()
	for i, e := range got {
		if e.Seq != first+int64(i) {
			t.Fatalf("event %d has seq %d, want %d (gap or duplicate)", i, e.Seq, first+int64(i))
		}
	}
}

func TestEventLogReplaysThenContinuesLive(t *testing.T) {
	ctx := context.Background()
	st := newManagedStore(t, "sesn_a")
	el := session.NewEventLog(st, session.EventLogConfig{})
	defer el.Close()

	if _, err := el.Append(ctx, "sesn_a", msgs(1, 5)); err != nil {
		t.Fatal(err)
	}
	all, err := el.Subscribe(ctx, "sesn_a", 0)
	if err != nil {
		t.Fatal(err)
	}
	from3, err := el.Subscribe(ctx, "sesn_a", 3)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := el.Append(ctx, "sesn_a", msgs(6, 5))
	if err != nil {
		t.Fatal(err)
	}
	got := collect(t, all, 10)
	checkSeqs(t, got, 1)
	if got[9].ID != stored[4].ID || string(got[9].Data) != string(stored[4].Data) {
		t.Fatalf("last event %+v, want %+v", got[9], stored[4])
	}
	checkSeqs(t, collect(t, from3, 7), 4)
}

func TestEventLogManyConcurrentAppendersAndSubscribers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	st := newManagedStore(t, "sesn_a")
	el := session.NewEventLog(st, session.EventLogConfig{Buffer: 8})
	defer el.Close()

	const writers, perWriter = 4, 100
	const total = writers * perWriter
	type result struct {
		after int64
		got   []store.SessionEvent
	}
	results := make(chan result, 16)
	var subs sync.WaitGroup
	subscribe := func(after int64) {
		ch, err := el.Subscribe(ctx, "sesn_a", after)
		if err != nil {
			t.Error(err)
			return
		}
		subs.Add(1)
		go func() {
			defer subs.Done()
			var got []store.SessionEvent
			for e := range ch {
				got = append(got, e)
				if e.Seq == total {
					break
				}
			}
			results <- result{after, got}
		}()
	}
	subscribe(0)
	var w sync.WaitGroup
	for i := range writers {
		w.Add(1)
		go func() {
			defer w.Done()
			for j := range perWriter {
				if _, err := el.Append(ctx, "sesn_a", msgs(i*perWriter+j, 1)); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	// Subscribe while appends are in flight, from wherever the log is.
	for range 5 {
		last, err := st.LastEventSeq(ctx, "sesn_a")
		if err != nil {
			t.Fatal(err)
		}
		subscribe(last / 2)
		subscribe(last)
	}
	w.Wait()
	subs.Wait()
	close(results)
	for r := range results {
		if len(r.got) != int(total-r.after) {
			t.Fatalf("subscriber after %d got %d events, want %d", r.after, len(r.got), total-r.after)
		}
		checkSeqs(t, r.got, r.after+1)
	}
}

func TestEventLogSlowSubscriberDoesNotHoldBackOthers(t *testing.T) {
	ctx := context.Background()
	st := newManagedStore(t, "sesn_a")
	lagged := make(chan string, 1)
	el := session.NewEventLog(st, session.EventLogConfig{Buffer: 4, PageSize: 16, Lagged: lagged})
	defer el.Close()

	slow, err := el.Subscribe(ctx, "sesn_a", 0)
	if err != nil {
		t.Fatal(err)
	}
	fast, err := el.Subscribe(ctx, "sesn_a", 0)
	if err != nil {
		t.Fatal(err)
	}
	// Nobody reads slow while 200 events are appended one by one: every
	// Append returns and fast sees them all, so slow blocked neither.
	const n = 200
	fastGot := make(chan []store.SessionEvent, 1)
	go func() {
		var got []store.SessionEvent
		for e := range fast {
			if got = append(got, e); len(got) == n {
				break
			}
		}
		fastGot <- got
	}()
	for i := range n {
		if _, err := el.Append(ctx, "sesn_a", msgs(i, 1)); err != nil {
			t.Fatal(err)
		}
	}
	if got := <-fastGot; len(got) != n {
		t.Fatalf("fast subscriber got %d events, want %d", len(got), n)
	} else {
		checkSeqs(t, got, 1)
	}
	select {
	case id := <-lagged:
		if id != "sesn_a" {
			t.Fatalf("lagged session %q", id)
		}
	default:
		t.Fatal("the slow subscriber never fell behind; the test did not exercise the gap replay")
	}
	// The slow subscriber still gets every event, in order, once.
	checkSeqs(t, collect(t, slow, n), 1)
	if _, err := el.Append(ctx, "sesn_a", msgs(n, 1)); err != nil {
		t.Fatal(err)
	}
	if e := collect(t, slow, 1)[0]; e.Seq != n+1 {
		t.Fatalf("after catching up, slow got seq %d, want %d", e.Seq, n+1)
	}
}

func TestEventLogEndsSubscriptions(t *testing.T) {
	st := newManagedStore(t, "sesn_a", "sesn_b")
	el := session.NewEventLog(st, session.EventLogConfig{})

	ctx, cancel := context.WithCancel(context.Background())
	byCtx, err := el.Subscribe(ctx, "sesn_a", 0)
	if err != nil {
		t.Fatal(err)
	}
	bySession, err := el.Subscribe(context.Background(), "sesn_a", 0)
	if err != nil {
		t.Fatal(err)
	}
	other, err := el.Subscribe(context.Background(), "sesn_b", 0)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	for range byCtx {
	}
	el.CloseSession("sesn_a")
	for range bySession {
	}
	if n := el.Subscribers("sesn_b"); n != 1 {
		t.Fatalf("sesn_b has %d subscribers after closing sesn_a, want 1", n)
	}
	el.Close()
	for range other {
	}
	if _, err := el.Subscribe(context.Background(), "sesn_b", 0); err == nil {
		t.Fatal("Subscribe after Close succeeded")
	}
	// Appending still stores.
	if _, err := el.Append(context.Background(), "sesn_b", msgs(0, 1)); err != nil {
		t.Fatal(err)
	}
	el.Close()
}

func TestEventLogAppendToUnknownSessionFails(t *testing.T) {
	st := newManagedStore(t)
	el := session.NewEventLog(st, session.EventLogConfig{})
	defer el.Close()
	if _, err := el.Append(context.Background(), "sesn_nope", msgs(0, 1)); err == nil {
		t.Fatal("append to an unknown session succeeded")
	}
}
