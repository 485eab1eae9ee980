package session

import (
	"context"
	"sync"

	"github.com/agentkernel/agentkernel/internal/store"
)

// subscription is one consumer of a session's events. Publishers only ever
// append to its bounded queue (never block); its pump goroutine moves
// events to the consumer in Seq order and fills gaps from the store.
type subscription struct {
	sessionID string
	max       int
	out       chan store.SessionEvent
	wake      chan struct{}
	quit      chan struct{}
	quitOnce  sync.Once

	mu    sync.Mutex
	queue []store.SessionEvent
	spare []store.SessionEvent
	// overflow is set when the queue was full: the events offered since
	// were not kept, and the pump must read them from the store.
	overflow bool
}

// offer queues evs without blocking; false means the subscriber had
// fallen behind (now or earlier) and will replay its gap from the store.
func (s *subscription) offer(evs []store.SessionEvent) bool {
	s.mu.Lock()
	ok := !s.overflow
	if ok && len(s.queue)+len(evs) > s.max {
		// Dropping the queue too is safe (the store has everything) and
		// frees the memory of a consumer that is not reading.
		s.overflow, s.queue, ok = true, s.queue[:0], false
	}
	if ok {
		s.queue = append(s.queue, evs...)
	}
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
	return ok
}

// take returns the queued events and whether the pump must replay from the
// store first. Clearing overflow here, before the pump reads the store,
// means every event published later is queued again: the replay and the
// queue overlap, never leave a hole.
func (s *subscription) take() ([]store.SessionEvent, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	batch := s.queue
	s.queue, s.spare = s.spare[:0], batch
	overflow := s.overflow
	s.overflow = false
	return batch, overflow
}

func (s *subscription) stop() { s.quitOnce.Do(func() { close(s.quit) }) }

// pump delivers Seq next, then next+1, …: from the store for the initial
// replay and for any gap, from the queue otherwise.
func (l *EventLog) pump(ctx context.Context, s *subscription, afterSeq int64) {
	defer l.wg.Done()
	defer close(s.out)
	defer l.unsubscribe(s)
	next := afterSeq + 1
	if !l.replay(ctx, s, &next) {
		return
	}
	for {
		batch, overflow := s.take()
		if overflow && !l.replay(ctx, s, &next) {
			return
		}
		for _, e := range batch {
			if e.Seq < next {
				continue // already delivered by a replay
			}
			if e.Seq > next {
				// A concurrent appender published out of order, or the
				// replay stopped short: the missing events are durable.
				if !l.replay(ctx, s, &next) {
					return
				}
				if e.Seq < next {
					continue
				}
				if e.Seq > next {
					l.cfg.Log.Warn("event log: events missing from the store; skipping ahead",
						"session_id", s.sessionID, "want_seq", next, "got_seq", e.Seq)
					next = e.Seq
				}
			}
			if !s.send(ctx, e) {
				return
			}
			next++
		}
		if len(batch) > 0 || overflow {
			continue
		}
		select {
		case <-s.wake:
		case <-ctx.Done():
			return
		case <-s.quit:
			return
		}
	}
}

// replay delivers every stored event from *next on, page by page, until the
// store has no more; false when the subscription ended.
func (l *EventLog) replay(ctx context.Context, s *subscription, next *int64) bool {
	for {
		evs, err := l.store.ListEvents(ctx, store.ListEventsParams{SessionID: s.sessionID, AfterSeq: *next - 1, Limit: l.cfg.PageSize})
		if err != nil {
			if ctx.Err() == nil {
				l.cfg.Log.Warn("event log: replay failed; closing the subscription", "session_id", s.sessionID, "after_seq", *next-1, "err", err)
			}
			return false
		}
		for _, e := range evs {
			if e.Seq < *next {
				continue
			}
			if !s.send(ctx, e) {
				return false
			}
			*next = e.Seq + 1
		}
		if len(evs) < l.cfg.PageSize {
			return true
		}
	}
}

func (s *subscription) send(ctx context.Context, e store.SessionEvent) bool {
	select {
	case s.out <- e:
		return true
	case <-ctx.Done():
		return false
	case <-s.quit:
		return false
	}
}
