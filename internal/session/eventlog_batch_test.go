package session

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// gatedStore is a real SQLite store that records the appends reaching it
// and, while gate is set, holds the first one until gate is closed, so a
// test can let the next commit round gather first.
type gatedStore struct {
	store.ManagedStore

	mu      sync.Mutex
	gate    chan struct{}
	entered chan struct{} // closed when the held append arrived
	singles int
	batches []map[string][]store.NewEvent
}

func (g *gatedStore) hold() {
	g.mu.Lock()
	gate, entered := g.gate, g.entered
	g.gate = nil
	g.mu.Unlock()
	if gate != nil {
		close(entered)
		<-gate
	}
}

func (g *gatedStore) AppendEvents(ctx context.Context, id string, evs []store.NewEvent) ([]store.SessionEvent, error) {
	g.hold()
	g.mu.Lock()
	g.singles++
	g.mu.Unlock()
	return g.ManagedStore.AppendEvents(ctx, id, evs)
}

func (g *gatedStore) AppendEventsBatch(ctx context.Context, b map[string][]store.NewEvent) (map[string][]store.SessionEvent, error) {
	g.hold()
	g.mu.Lock()
	g.batches = append(g.batches, b)
	g.mu.Unlock()
	return g.ManagedStore.AppendEventsBatch(ctx, b)
}

// newGatedLog opens a SQLite store with the given sessions, gates it, and
// returns an event log over it.
func newGatedLog(t *testing.T, cfg EventLogConfig, sessions ...string) (*EventLog, *gatedStore, func()) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	for _, id := range sessions {
		if _, err := st.CreateManagedSession(ctx, &store.ManagedSession{ID: id, TenantID: "t", AgentID: "agent_1",
			AgentVersion: 1, EnvironmentID: "env_1", Doc: json.RawMessage(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	g := &gatedStore{ManagedStore: st, gate: make(chan struct{}), entered: make(chan struct{})}
	l := NewEventLog(g, cfg)
	t.Cleanup(l.Close)
	gate := g.gate
	return l, g, sync.OnceFunc(func() { close(gate) })
}

// waitPending waits (for a hang, not a timing threshold) until n Appends
// are queued behind the held commit.
func waitPending(t *testing.T, l *EventLog, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for l.pendingAppends() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d appends pending, want %d", l.pendingAppends(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func gcEvents(tag string, n int) []store.NewEvent {
	evs := make([]store.NewEvent, n)
	for i := range evs {
		evs[i] = store.NewEvent{Type: "agent.message", Data: json.RawMessage(fmt.Sprintf(`{"tag":%q,"i":%d}`, tag, i))}
	}
	return evs
}

type gcResult struct {
	out []store.SessionEvent
	err error
}

// appendAll starts one Append per entry of plan (session → events) and
// returns their results once all have returned.
func appendAll(ctx context.Context, l *EventLog, plan []gcAppend) func() []gcResult {
	res := make([]gcResult, len(plan))
	var wg sync.WaitGroup
	for i, p := range plan {
		wg.Go(func() { res[i].out, res[i].err = l.Append(p.ctx(ctx), p.session, p.evs) })
	}
	return func() []gcResult { wg.Wait(); return res }
}

type gcAppend struct {
	session string
	evs     []store.NewEvent
	cctx    context.Context
}

func (a gcAppend) ctx(def context.Context) context.Context {
	if a.cctx != nil {
		return a.cctx
	}
	return def
}

// TestEventLogGroupCommitsConcurrentAppends: appends that arrive while a
// commit runs are stored by ONE batch across their sessions, each caller
// gets its own contiguous events, and every subscriber sees each event
// once, in order, only after it is stored.
func TestEventLogGroupCommitsConcurrentAppends(t *testing.T) {
	ctx := context.Background()
	const sessions, perSession = 8, 3
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = fmt.Sprintf("sesn_%d", i)
	}
	l, g, release := newGatedLog(t, EventLogConfig{}, ids...)

	// Every live event must already be in the store when it arrives.
	type seen struct {
		got     []store.SessionEvent
		missing []string
	}
	subs := make([]chan seen, sessions)
	for i, id := range ids {
		ch, err := l.Subscribe(ctx, id, 0)
		if err != nil {
			t.Fatal(err)
		}
		subs[i] = make(chan seen, 1)
		want := perSession * 2
		if i == 0 {
			want++ // the held append
		}
		go func() {
			var s seen
			for ev := range ch {
				if _, err := g.ManagedStore.GetEvent(ctx, id, ev.ID); err != nil {
					s.missing = append(s.missing, ev.ID)
				}
				if s.got = append(s.got, ev); len(s.got) == want {
					break
				}
			}
			subs[i] <- s
		}()
	}

	first := appendAll(ctx, l, []gcAppend{{session: ids[0], evs: gcEvents("held", 1)}})
	<-g.entered
	var plan []gcAppend
	for round := range perSession {
		for i, id := range ids {
			plan = append(plan, gcAppend{session: id, evs: gcEvents(fmt.Sprintf("%d-%d", i, round), 2)})
		}
	}
	rest := appendAll(ctx, l, plan)
	waitPending(t, l, len(plan))
	release()
	if r := first()[0]; r.err != nil || len(r.out) != 1 || r.out[0].Seq != 1 {
		t.Fatalf("held append: %+v", r)
	}
	results := rest()

	g.mu.Lock()
	batches, singles := g.batches, g.singles
	g.mu.Unlock()
	if len(batches) != 1 || singles != 1 {
		t.Fatalf("store saw %d batches and %d single appends, want 1 batch (of all %d appends) and the held single",
			len(batches), singles, len(plan))
	}
	if len(batches[0]) != sessions {
		t.Fatalf("the batch held %d sessions, want %d", len(batches[0]), sessions)
	}
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("append %d: %v", i, r.err)
		}
		if len(r.out) != 2 || r.out[1].Seq != r.out[0].Seq+1 || r.out[0].SessionID != plan[i].session {
			t.Fatalf("append %d to %s returned %+v", i, plan[i].session, r.out)
		}
		if string(r.out[0].Data) != string(plan[i].evs[0].Data) {
			t.Fatalf("append %d returned data %s, want %s", i, r.out[0].Data, plan[i].evs[0].Data)
		}
	}
	for i := range subs {
		s := <-subs[i]
		if len(s.missing) > 0 {
			t.Fatalf("%s: events %v were delivered before they were stored", ids[i], s.missing)
		}
		for j, ev := range s.got {
			if ev.Seq != int64(j+1) {
				t.Fatalf("%s: event %d has seq %d", ids[i], j, ev.Seq)
			}
		}
	}
}

// TestEventLogGroupCommitIsolatesFailures: one bad append in a round (an
// unknown session, a repeated id) fails alone; the others are stored.
func TestEventLogGroupCommitIsolatesFailures(t *testing.T) {
	ctx := context.Background()
	l, g, release := newGatedLog(t, EventLogConfig{}, "sesn_a", "sesn_b")
	first := appendAll(ctx, l, []gcAppend{{session: "sesn_a", evs: []store.NewEvent{{ID: "sevt_taken", Type: "user.message"}}}})
	<-g.entered
	plan := []gcAppend{
		{session: "sesn_a", evs: gcEvents("a", 2)},
		{session: "sesn_missing", evs: gcEvents("x", 1)},
		{session: "sesn_b", evs: gcEvents("b", 1)},
		{session: "sesn_a", evs: []store.NewEvent{{ID: "sevt_taken", Type: "user.message"}}},
	}
	rest := appendAll(ctx, l, plan)
	waitPending(t, l, len(plan))
	release()
	if r := first()[0]; r.err != nil {
		t.Fatal(r.err)
	}
	res := rest()
	if res[0].err != nil || res[2].err != nil {
		t.Fatalf("good appends failed: %v, %v", res[0].err, res[2].err)
	}
	if !errors.Is(res[1].err, store.ErrNotFound) {
		t.Fatalf("append to an unknown session: %v, want ErrNotFound", res[1].err)
	}
	if !errors.Is(res[3].err, store.ErrAlreadyExists) {
		t.Fatalf("append of a stored id: %v, want ErrAlreadyExists", res[3].err)
	}
	g.mu.Lock()
	nBatches := len(g.batches)
	g.mu.Unlock()
	if nBatches != 1 {
		t.Fatalf("store saw %d batches, want 1 (then the retries one by one)", nBatches)
	}
	for id, want := range map[string]int64{"sesn_a": 3, "sesn_b": 1} {
		if n, err := g.ManagedStore.LastEventSeq(ctx, id); err != nil || n != want {
			t.Fatalf("%s: LastEventSeq %d, %v; want %d", id, n, err, want)
		}
	}
}

// TestEventLogGroupCommitSkipsCancelled: an append whose context ended
// while it waited for its round is not stored and reports the context's
// error; the rest of the round is.
func TestEventLogGroupCommitSkipsCancelled(t *testing.T) {
	ctx := context.Background()
	l, g, release := newGatedLog(t, EventLogConfig{}, "sesn_a", "sesn_b")
	first := appendAll(ctx, l, []gcAppend{{session: "sesn_a", evs: gcEvents("held", 1)}})
	<-g.entered
	cctx, cancel := context.WithCancel(ctx)
	rest := appendAll(ctx, l, []gcAppend{
		{session: "sesn_b", evs: gcEvents("gone", 1), cctx: cctx},
		{session: "sesn_a", evs: gcEvents("kept", 1)},
	})
	waitPending(t, l, 2)
	cancel()
	release()
	first()
	res := rest()
	if !errors.Is(res[0].err, context.Canceled) {
		t.Fatalf("cancelled append: %v, want context.Canceled", res[0].err)
	}
	if res[1].err != nil || res[1].out[0].Seq != 2 {
		t.Fatalf("live append: %+v", res[1])
	}
	if n, err := g.ManagedStore.LastEventSeq(ctx, "sesn_b"); err != nil || n != 0 {
		t.Fatalf("sesn_b: LastEventSeq %d, %v; want 0 (nothing stored)", n, err)
	}
}

// TestEventLogGroupCommitRespectsMaxBatch: a round stores at most
// MaxBatch events; what does not fit waits for the next round.
func TestEventLogGroupCommitRespectsMaxBatch(t *testing.T) {
	ctx := context.Background()
	l, g, release := newGatedLog(t, EventLogConfig{MaxBatch: 3}, "sesn_a", "sesn_b")
	first := appendAll(ctx, l, []gcAppend{{session: "sesn_a", evs: gcEvents("held", 1)}})
	<-g.entered
	var plan []gcAppend
	for i := range 10 {
		plan = append(plan, gcAppend{session: []string{"sesn_a", "sesn_b"}[i%2], evs: gcEvents(fmt.Sprint(i), 1)})
	}
	rest := appendAll(ctx, l, plan)
	waitPending(t, l, len(plan))
	release()
	first()
	for i, r := range rest() {
		if r.err != nil {
			t.Fatalf("append %d: %v", i, r.err)
		}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	stored := g.singles - 1
	for _, b := range g.batches {
		n := 0
		for _, evs := range b {
			n += len(evs)
		}
		if n > 3 {
			t.Fatalf("a batch stored %d events, more than MaxBatch 3", n)
		}
		stored += n
	}
	if stored != len(plan) || len(g.batches) < 3 {
		t.Fatalf("stored %d events in %d batches and %d singles; want %d events in at least 3 batches",
			stored, len(g.batches), g.singles-1, len(plan))
	}
}
