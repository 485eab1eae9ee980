package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// ErrEventLogClosed is returned by Subscribe after Close.
var ErrEventLogClosed = errors.New("event log closed")

// EventLogConfig tunes an EventLog.
type EventLogConfig struct {
	Log *slog.Logger
	// Buffer bounds each subscriber's queue of live events (default 256).
	// A subscriber whose queue is full is not waited for: it reads its gap
	// back from the store instead.
	Buffer int
	// PageSize is how many events one store read fetches (default 512).
	PageSize int
	// Lagged, when set, receives the session id each time a subscriber
	// falls behind and switches to replay (a test signal; never blocks).
	Lagged chan<- string
	// MaxBatch bounds how many events one group commit stores (default
	// 4096); an Append larger than that is committed on its own.
	MaxBatch int
}

// EventLog is the durable, live event stream of every session. Append
// persists first and only then publishes, so whatever a subscriber sees is
// already durable; Subscribe replays from the store and continues live.
// Sequence numbers (dense per session) are the only coordination between
// replay and live delivery: a subscriber delivers Seq next and nothing
// else, drops what it already delivered and reads any gap from the store.
// That makes it correct for every interleaving of Append and Subscribe,
// for concurrent appenders that publish out of order, and for a
// subscriber that overflowed its buffer.
type EventLog struct {
	store store.ManagedStore
	cfg   EventLogConfig

	mu     sync.RWMutex
	topics map[string]map[*subscription]struct{}
	closed bool
	wg     sync.WaitGroup

	// Group commit: Append queues its request in pending; one committer
	// goroutine at a time stores everything pending in one transaction.
	cmu        sync.Mutex
	pending    []*appendReq
	committing bool
}

// NewEventLog returns an event log over st.
func NewEventLog(st store.ManagedStore, cfg EventLogConfig) *EventLog {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 256
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 512
	}
	if cfg.MaxBatch <= 0 {
		cfg.MaxBatch = 4096
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &EventLog{store: st, cfg: cfg, topics: map[string]map[*subscription]struct{}{}}
}

// Append stores evs atomically, in order, then hands them to the session's
// live subscribers without waiting for any of them. Concurrent Appends, of
// any sessions, share one store transaction (see commitLoop); each returns
// once its own events are durable and published.
func (l *EventLog) Append(ctx context.Context, sessionID string, evs []store.NewEvent) ([]store.SessionEvent, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	req := &appendReq{ctx: ctx, sessionID: sessionID, evs: evs, done: make(chan struct{})}
	l.cmu.Lock()
	l.pending = append(l.pending, req)
	lead := !l.committing
	l.committing = true
	l.cmu.Unlock()
	if lead {
		l.commitLoop(req)
	}
	// Not abandoned when ctx ends: the events may be committing, and the
	// caller must learn whether they were stored.
	<-req.done
	if req.err != nil {
		return nil, fmt.Errorf("append %d events to session %s: %w", len(evs), sessionID, req.err)
	}
	return req.out, nil
}

// Publish hands events that are already durable (a store transaction
// wrote them with more than events, e.g. a turn's end) to the session's
// live subscribers, as Append does after its commit.
func (l *EventLog) Publish(sessionID string, evs []store.SessionEvent) { l.publish(sessionID, evs) }

func (l *EventLog) publish(sessionID string, evs []store.SessionEvent) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for s := range l.topics[sessionID] {
		if !s.offer(evs) && l.cfg.Lagged != nil {
			select {
			case l.cfg.Lagged <- sessionID:
			default:
			}
		}
	}
}

// Subscribe streams the session's events with Seq > afterSeq: first those
// already stored, then live ones, in Seq order, each exactly once. The
// channel is closed when ctx ends, when the session's subscriptions are
// closed (CloseSession), when the log closes, or after a store error
// (logged); a consumer that reconnects from the last Seq it saw misses
// nothing.
func (l *EventLog) Subscribe(ctx context.Context, sessionID string, afterSeq int64) (<-chan store.SessionEvent, error) {
	if afterSeq < 0 {
		afterSeq = 0
	}
	s := &subscription{
		sessionID: sessionID,
		max:       l.cfg.Buffer,
		out:       make(chan store.SessionEvent),
		wake:      make(chan struct{}, 1),
		quit:      make(chan struct{}),
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, ErrEventLogClosed
	}
	// Registered before the first store read, so nothing published from
	// now on can fall between the replay and the live queue.
	subs := l.topics[sessionID]
	if subs == nil {
		subs = map[*subscription]struct{}{}
		l.topics[sessionID] = subs
	}
	subs[s] = struct{}{}
	l.wg.Add(1)
	l.mu.Unlock()
	go l.pump(ctx, s, afterSeq)
	return s.out, nil
}

// Subscribers counts the live subscriptions of a session.
func (l *EventLog) Subscribers(sessionID string) int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	return len(l.topics[sessionID])
}

// CloseSession ends every subscription of a session (it was deleted).
func (l *EventLog) CloseSession(sessionID string) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	for s := range l.topics[sessionID] {
		s.stop()
	}
}

// Start is a no-op: the log runs on its subscribers' goroutines. It lets
// the daemon manage the log like its other services.
func (l *EventLog) Start(context.Context) error { return nil }

// Stop is Close.
func (l *EventLog) Stop() { l.Close() }

// Close ends every subscription and waits for their goroutines; later
// Subscribe calls fail. Append keeps working (events are still stored).
// Closing twice is fine.
func (l *EventLog) Close() {
	l.mu.Lock()
	l.closed = true
	for _, subs := range l.topics {
		for s := range subs {
			s.stop()
		}
	}
	l.mu.Unlock()
	l.wg.Wait()
}

func (l *EventLog) unsubscribe(s *subscription) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if subs := l.topics[s.sessionID]; subs != nil {
		delete(subs, s)
		if len(subs) == 0 {
			delete(l.topics, s.sessionID)
		}
	}
}

// appendReq is one Append waiting for its group commit.
type appendReq struct {
	ctx       context.Context
	sessionID string
	evs       []store.NewEvent
	out       []store.SessionEvent
	err       error
	done      chan struct{}
}

// commitLoop stores pending appends, a round at a time: while one round
// commits, the next gathers, so under load many Appends share each commit
// (SQLite's one writer pays per transaction, not per event). The Append
// that finds no committer runs the loop itself (no handoff when appends
// do not overlap) until its own round is stored; whatever gathered by then
// is left to a goroutine that runs only until nothing is pending, so no
// goroutine outlives the Appends it serves and the log needs no Start.
func (l *EventLog) commitLoop(own *appendReq) {
	for {
		l.cmu.Lock()
		round := l.takeRound()
		if len(round) == 0 {
			l.committing = false
			l.cmu.Unlock()
			return
		}
		l.cmu.Unlock()
		l.commit(round)
		// Durable first, then published, then the callers return.
		mine := false
		for _, r := range round {
			if r.err == nil {
				l.publish(r.sessionID, r.out)
			}
			mine = mine || r == own
			close(r.done)
		}
		if mine {
			l.cmu.Lock()
			more := len(l.pending) > 0
			if !more {
				l.committing = false
			}
			l.cmu.Unlock()
			if more {
				go l.commitLoop(nil)
			}
			return
		}
	}
}

// takeRound removes the oldest pending requests, up to MaxBatch events
// (at least one request). Called with cmu held.
func (l *EventLog) takeRound() []*appendReq {
	n, events := 0, 0
	for n < len(l.pending) && (n == 0 || events+len(l.pending[n].evs) <= l.cfg.MaxBatch) {
		events += len(l.pending[n].evs)
		n++
	}
	round := l.pending[:n:n]
	l.pending = l.pending[n:]
	if len(l.pending) == 0 {
		l.pending = nil
	}
	return round
}

// commit stores a round, setting each request's out or err. One request
// goes through AppendEvents with its own context. Several go into one
// AppendEventsBatch; should that fail (it stores nothing), each request is
// retried alone so only the faulty ones fail.
func (l *EventLog) commit(round []*appendReq) {
	live := round[:0:0]
	for _, r := range round {
		if err := r.ctx.Err(); err != nil {
			r.err = err // never stored; nobody waits for it any more
			continue
		}
		live = append(live, r)
	}
	if len(live) == 1 {
		r := live[0]
		r.out, r.err = l.store.AppendEvents(r.ctx, r.sessionID, r.evs)
		return
	}
	if len(live) == 0 {
		return
	}
	// Ids are given here, not by the store, so a retry after a commit
	// whose outcome is unknown fails as a duplicate instead of storing
	// the events twice.
	batch := make(map[string][]store.NewEvent, len(live))
	offset := make([]int, len(live))
	for i, r := range live {
		evs := make([]store.NewEvent, len(r.evs))
		for j, ev := range r.evs {
			if ev.ID == "" {
				ev.ID = ids.New("sevt")
			}
			evs[j] = ev
		}
		r.evs = evs
		offset[i] = len(batch[r.sessionID])
		batch[r.sessionID] = append(batch[r.sessionID], evs...)
	}
	// The transaction serves every caller, so no one caller's cancellation
	// may abort it.
	stored, err := l.store.AppendEventsBatch(context.WithoutCancel(live[0].ctx), batch)
	if err == nil {
		for i, r := range live {
			evs := stored[r.sessionID]
			r.out = evs[offset[i] : offset[i]+len(r.evs) : offset[i]+len(r.evs)]
		}
		return
	}
	l.cfg.Log.Debug("event log: group commit failed; appending one by one",
		"appends", len(live), "err", err)
	for _, r := range live {
		r.out, r.err = l.store.AppendEvents(r.ctx, r.sessionID, r.evs)
	}
}

// pendingAppends counts the Appends waiting for a commit round (a test
// signal: tests wait for a round to gather before letting it commit).
func (l *EventLog) pendingAppends() int {
	l.cmu.Lock()
	defer l.cmu.Unlock()
	return len(l.pending)
}
