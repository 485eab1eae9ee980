package session

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"

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
}

// NewEventLog returns an event log over st.
func NewEventLog(st store.ManagedStore, cfg EventLogConfig) *EventLog {
	if cfg.Buffer <= 0 {
		cfg.Buffer = 256
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 512
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &EventLog{store: st, cfg: cfg, topics: map[string]map[*subscription]struct{}{}}
}

// Append stores evs atomically, in order, then hands them to the session's
// live subscribers without waiting for any of them.
func (l *EventLog) Append(ctx context.Context, sessionID string, evs []store.NewEvent) ([]store.SessionEvent, error) {
	if len(evs) == 0 {
		return nil, nil
	}
	out, err := l.store.AppendEvents(ctx, sessionID, evs)
	if err != nil {
		return nil, fmt.Errorf("append %d events to session %s: %w", len(evs), sessionID, err)
	}
	l.publish(sessionID, out)
	return out, nil
}

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
