// Package envwork is the environment work queue of self_hosted
// environments (issue 16): the protocol the official SDK's
// lib/environments worker speaks. A session of a self_hosted environment
// gets a work item when it is created, when a user event reaches it, and
// when its turn waits for the results of sandbox tools; a worker on
// another host polls the environment's queue, acks the item, keeps it
// leased with heartbeats while it serves the session (it runs the
// session's bash/read/write/… calls and sends user.tool_result events)
// and stops it when it is done.
//
// The queue's state is the store's (store.WorkStore): every transition is
// one transaction there, so it survives a daemon's crash and is shared by
// every daemon on one store. What lives here is what needs no durability:
// the wake-ups of blocked polls and the count of polling workers.
package envwork

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Defaults and bounds of the protocol.
const (
	// DefaultLeaseTTL is an acked item's lease without heartbeats.
	DefaultLeaseTTL = 60 * time.Second
	// MinLeaseTTL and MaxLeaseTTL bound a heartbeat's desired_ttl_seconds.
	MinLeaseTTL = 2 * time.Second
	MaxLeaseTTL = 10 * time.Minute
	// DefaultReclaim is how long a polled item waits for its ack before
	// another poll may hand it out (the SDK's default 5000 ms).
	DefaultReclaim = 5 * time.Second
	// MaxBlock bounds a poll's block_ms (the SDK: 1-999).
	MaxBlock = 999 * time.Millisecond
	// pollerWindow: workers that polled within it count as polling.
	pollerWindow = 30 * time.Second
)

// Options configure a Queue.
type Options struct {
	Store store.WorkStore
	// LeaseTTL is the lease an ack or a heartbeat without
	// desired_ttl_seconds gives (default DefaultLeaseTTL).
	LeaseTTL time.Duration
	Log      *slog.Logger
	Clock    func() time.Time
}

// Queue serves the work queues of every self_hosted environment.
type Queue struct {
	st    store.WorkStore
	ttl   time.Duration
	log   *slog.Logger
	clock func() time.Time

	mu sync.Mutex
	// wake[env] is closed (and dropped) when env gets new work: the polls
	// blocked on it look again.
	wake map[string]chan struct{}
	// pollers[env][worker] is the worker's last poll.
	pollers map[string]map[string]time.Time
}

// New makes a Queue.
func New(o Options) *Queue {
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	return &Queue{st: o.Store, ttl: o.LeaseTTL, log: o.Log, clock: o.Clock,
		wake: map[string]chan struct{}{}, pollers: map[string]map[string]time.Time{}}
}

// LeaseTTL is the default lease.
func (q *Queue) LeaseTTL() time.Duration { return q.ttl }

func (q *Queue) now() time.Time { return q.clock().UTC() }

// EnsureSession queues work for the session unless it has live work
// (queued, or held by a worker). Idempotent: the caller may call it at
// every point the session needs a worker.
func (q *Queue) EnsureSession(ctx context.Context, s *store.ManagedSession) error {
	item, created, err := q.st.EnsureSessionWork(ctx, store.WorkItem{
		ID: ids.New("work"), TenantID: s.TenantID, EnvironmentID: s.EnvironmentID, SessionID: s.ID,
		State: store.WorkQueued, Metadata: map[string]string{}, CreatedAt: q.now(),
	})
	if err != nil {
		return fmt.Errorf("queue work for session %s: %w", s.ID, err)
	}
	if created {
		q.log.DebugContext(ctx, "work queued", "work_id", item.ID, "session", s.ID, "environment", s.EnvironmentID)
		q.notify(s.EnvironmentID)
	}
	return nil
}

// StopSession stops the session's live work: the session ended.
func (q *Queue) StopSession(ctx context.Context, sessionID string) error {
	return q.st.StopSessionWork(ctx, sessionID, q.now())
}

func (q *Queue) notify(env string) {
	q.mu.Lock()
	if ch, ok := q.wake[env]; ok {
		close(ch)
		delete(q.wake, env)
	}
	q.mu.Unlock()
}

func (q *Queue) waiter(env string) <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	ch, ok := q.wake[env]
	if !ok {
		ch = make(chan struct{})
		q.wake[env] = ch
	}
	return ch
}

// PollParams is one poll.
type PollParams struct {
	TenantID, EnvironmentID string
	WorkerID                string
	// Block: how long to wait for work (0: answer at once).
	Block time.Duration
	// Reclaim: a polled item not acked within it may be handed out again
	// (0: DefaultReclaim).
	Reclaim time.Duration
}

// Poll hands out the oldest claimable item, waiting up to p.Block for one.
// nil, nil: none.
func (q *Queue) Poll(ctx context.Context, p PollParams) (*store.WorkItem, error) {
	if p.Reclaim <= 0 {
		p.Reclaim = DefaultReclaim
	}
	if p.WorkerID != "" {
		q.mu.Lock()
		ws := q.pollers[p.EnvironmentID]
		if ws == nil {
			ws = map[string]time.Time{}
			q.pollers[p.EnvironmentID] = ws
		}
		ws[p.WorkerID] = q.now()
		q.mu.Unlock()
	}
	var deadline <-chan time.Time
	if p.Block > 0 {
		t := time.NewTimer(p.Block)
		defer t.Stop()
		deadline = t.C
	}
	for {
		// Taken before the claim: work queued after the claim looked
		// closes it.
		wake := q.waiter(p.EnvironmentID)
		item, err := q.st.ClaimWork(ctx, store.ClaimWorkParams{
			TenantID: p.TenantID, EnvironmentID: p.EnvironmentID, WorkerID: p.WorkerID,
			Now: q.now(), ReclaimOlderThan: p.Reclaim,
		})
		if err == nil {
			return item, nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return nil, err
		}
		if deadline == nil {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline:
			deadline = nil // one last look: a lease may have lapsed meanwhile
		case <-wake:
		}
	}
}

// Ack confirms a polled item: queued → starting, leased for the default TTL.
func (q *Queue) Ack(ctx context.Context, tenantID, envID, id string) (*store.WorkItem, error) {
	return q.st.AckWork(ctx, tenantID, envID, id, q.now(), q.ttl)
}

// Beat is a heartbeat's outcome.
type Beat struct {
	Item *store.WorkItem
	// Extended: the lease was extended (false once the item stopped).
	Extended bool
	TTL      time.Duration
}

// Heartbeat extends the lease the worker holds (expected is the token its
// last heartbeat returned, "" for its first). desired is the TTL asked for
// (0: the default), clamped to [MinLeaseTTL, MaxLeaseTTL].
func (q *Queue) Heartbeat(ctx context.Context, tenantID, envID, id, expected string, desired time.Duration) (Beat, error) {
	ttl := q.ttl
	if desired > 0 {
		ttl = min(max(desired, MinLeaseTTL), MaxLeaseTTL)
	}
	item, err := q.st.HeartbeatWork(ctx, store.HeartbeatWorkParams{
		TenantID: tenantID, EnvironmentID: envID, ID: id, Expected: expected, Now: q.now(), TTL: ttl,
	})
	if err != nil {
		return Beat{}, err
	}
	return Beat{Item: item, Extended: item.State != store.WorkStopped, TTL: ttl}, nil
}

// Stop stops an item: at once with force, else it is stopping until its
// worker stops it (or its lease lapses).
func (q *Queue) Stop(ctx context.Context, tenantID, envID, id string, force bool) (*store.WorkItem, error) {
	return q.st.StopWork(ctx, tenantID, envID, id, force, q.now())
}

// Get reads an item.
func (q *Queue) Get(ctx context.Context, tenantID, envID, id string) (*store.WorkItem, error) {
	return q.st.GetWork(ctx, tenantID, envID, id)
}

// List lists an environment's items, newest first.
func (q *Queue) List(ctx context.Context, tenantID, envID, after string, limit int) ([]*store.WorkItem, error) {
	return q.st.ListWork(ctx, tenantID, envID, after, limit)
}

// UpdateMetadata patches an item's metadata (nil deletes a key).
func (q *Queue) UpdateMetadata(ctx context.Context, tenantID, envID, id string, patch map[string]*string) (*store.WorkItem, error) {
	return q.st.UpdateWorkMetadata(ctx, tenantID, envID, id, patch)
}

// Stats is a queue's state and its polling workers.
type Stats struct {
	store.WorkStats
	// WorkersPolling: workers (by id) that polled this daemon within the
	// last 30 seconds.
	WorkersPolling int64
}

// Stats counts an environment's queue.
func (q *Queue) Stats(ctx context.Context, tenantID, envID string) (Stats, error) {
	now := q.now()
	st, err := q.st.WorkStats(ctx, tenantID, envID, now, DefaultReclaim)
	if err != nil {
		return Stats{}, err
	}
	out := Stats{WorkStats: st}
	q.mu.Lock()
	for w, at := range q.pollers[envID] {
		if now.Sub(at) <= pollerWindow {
			out.WorkersPolling++
		} else {
			delete(q.pollers[envID], w)
		}
	}
	q.mu.Unlock()
	return out, nil
}
