package session

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// worker runs one session's turns, one at a time, on its own goroutine.
// It owns the session's folded conversation.
type worker struct {
	r    *Runtime
	id   string
	wake chan struct{}
	conv *convo
	// ctxBase: the provider's count of the last request, for the token
	// estimate of the next (turn_compact.go).
	ctxBase ctxBase
	// agent caches the parsed agent (by id and version).
	agent    *agentSpec
	agentKey string
	// rewinds is the session's rewind count when conv was folded: another
	// means the log was rewound under it.
	rewinds int64
	// workspace is the snapshot of the session's last checkpoint, when
	// known (workspaceKnown): a turn starts from it (turn_steps.go).
	workspace      string
	workspaceKnown bool
	// threads wakes a coordinator's turn that waits for its threads;
	// threadNames caches their agents' names (thread_sync.go).
	threads     chan struct{}
	threadNames map[string]string
	// hosted caches whether the session's environment is self_hosted
	// (hostedKnown): an environment's type never changes.
	hosted, hostedKnown bool

	mu       sync.Mutex
	abort    context.CancelCauseFunc // of the running turn, nil between turns
	turnDone chan struct{}
	// recovery is an orphaned run row the sweep claimed for this process,
	// waiting for the drain to resume its turn; it is counted in
	// Runtime.pendingResumes (until the turn is resumed), pendingCounted.
	recovery       *store.RunRow
	pendingCounted bool
	// resumeSlot: the drain holds one of the runtime's resuming tokens
	// (worker goroutine only).
	resumeSlot bool

	// running says a goroutine runs the worker; evict, while it is parked,
	// removes it after IdleWorker. Both are guarded by the runtime's mu.
	running  bool
	evict    *time.Timer
	parkedAt *list.Element
}

// startResume waits for a resuming token when a recovery is pending; it
// reports false when ctx ended first.
func (w *worker) startResume(ctx context.Context) bool {
	w.mu.Lock()
	pending := w.recovery != nil
	w.mu.Unlock()
	if !pending || w.resumeSlot {
		return true
	}
	select {
	case w.r.resuming <- struct{}{}:
		w.resumeSlot = true
		return true
	case <-ctx.Done():
		return false
	}
}

// endResume gives the resuming token back, if the drain holds one.
func (w *worker) endResume() {
	if w.resumeSlot {
		w.resumeSlot = false
		<-w.r.resuming
	}
}

// setRecovery hands the worker an orphaned row this process claimed. It
// counts as pending (Runtime.pendingResumes) until the drain is done with
// it or drops it.
func (w *worker) setRecovery(row *store.RunRow) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.pendingCounted {
		w.pendingCounted = true
		w.r.pendingResumes.Add(1)
	}
	w.recovery = row
}

// resumed counts the handed-over row as resumed (Runtime.pendingResumes):
// its turn runs again, or never will here. The worker still holds it
// until the turn ends.
func (w *worker) resumed() {
	w.mu.Lock()
	counted := w.pendingCounted
	w.pendingCounted = false
	w.mu.Unlock()
	if counted {
		w.r.resumeDone()
	}
}

// pendingRecovery is the row handed over, if any. It stays the worker's
// (holds reports it) until dropRecovery, so the sweep never claims a row
// again while its turn is being resumed here.
func (w *worker) pendingRecovery() *store.RunRow {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.recovery
}

// dropRecovery ends the worker's hold on a handed-over row: its turn was
// resumed (or given up), or its session is gone or terminated.
func (w *worker) dropRecovery() {
	w.mu.Lock()
	w.recovery = nil
	w.mu.Unlock()
	w.resumed()
}

// holds: a turn runs, or a recovery is pending or being resumed.
func (w *worker) holds() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.turnDone != nil || w.recovery != nil
}

func newWorker(r *Runtime, id string) *worker {
	return &worker{r: r, id: id, wake: make(chan struct{}, 1), threads: make(chan struct{}, 1), threadNames: map[string]string{}}
}

func (w *worker) notify() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// run drains the session's queue on its own goroutine while there is
// work, then parks: the goroutine exits and the worker (its folded
// conversation) stays in the runtime's map for IdleWorker, so the next
// wake-up starts a goroutine that goes on from it. An idle session costs
// no goroutine (and no stack).
func (w *worker) run(ctx context.Context) {
	defer w.r.wg.Done()
	for {
		select {
		case <-ctx.Done():
			w.r.park(w)
			return
		case <-w.wake:
			w.drain(ctx)
		default:
			if w.r.park(w) {
				return
			}
		}
	}
}

// drain runs turns while the queue has work: queued user messages, or the
// results and confirmations a requires_action turn waited for.
func (w *worker) drain(ctx context.Context) {
	defer w.endResume()
	for ctx.Err() == nil && !w.r.isTerminating(w.id) {
		if !w.startResume(ctx) {
			return
		}
		s, err := w.r.cfg.Store.GetManagedSession(ctx, w.id)
		if err != nil {
			if !errors.Is(err, store.ErrNotFound) {
				w.r.log.WarnContext(ctx, "session load", "session", w.id, "err", err)
			} else {
				w.dropRecovery()
			}
			return
		}
		if s.TerminatedAt != nil || s.ArchivedAt != nil {
			w.dropRecovery()
			return
		}
		rec := w.pendingRecovery()
		if w.conv == nil || rec != nil || s.Lineage.Rewinds != w.rewinds {
			// Recovery rebuilds the conversation from the store alone, and
			// so does a worker whose log was rewound under it.
			selfHosted, err := w.selfHosted(ctx, s)
			if err != nil {
				w.r.log.WarnContext(ctx, "session environment load", "session", w.id, "err", err)
				return
			}
			w.conv, w.rewinds, w.workspaceKnown, w.ctxBase = newConvo(selfHosted), s.Lineage.Rewinds, false, ctxBase{}
		}
		if err := w.sync(ctx); err != nil {
			w.r.log.WarnContext(ctx, "session events load", "session", w.id, "err", err)
			return
		}
		if rec != nil {
			w.recoverTurn(ctx, s, rec)
			w.dropRecovery()
			w.endResume()
			continue
		}
		if w.conv.threads {
			// What the threads did while no turn ran (an answer queues a
			// turn of the coordinator).
			if _, err := w.syncThreads(ctx); err != nil {
				w.r.log.WarnContext(ctx, "sync threads", "session", w.id, "err", err)
			}
		}
		if !w.conv.needsTurn() {
			// Nothing to run (e.g. an interrupt with no turn running): the
			// user events up to here are processed all the same.
			if s.ProcessedSeq < w.conv.lastUserSeq {
				w.setProcessed(ctx, w.conv.lastUserSeq)
			}
			return
		}
		w.turn(ctx, s, nil)
	}
}

// sync folds the events appended since the conversation's last Seq.
func (w *worker) sync(ctx context.Context) error {
	for {
		evs, err := w.r.cfg.Store.ListEvents(ctx, store.ListEventsParams{SessionID: w.id, AfterSeq: w.conv.seq, Limit: 1000})
		if err != nil {
			return err
		}
		for _, ev := range evs {
			w.conv.fold(ev)
		}
		if len(evs) < 1000 {
			return nil
		}
	}
}

// appended folds events this worker just appended. When nothing else was
// appended in between (the usual case) they fold directly; otherwise the
// gap is read from the store so the fold stays in Seq order.
func (w *worker) appended(ctx context.Context, evs []store.SessionEvent) {
	if len(evs) == 0 {
		return
	}
	if evs[0].Seq != w.conv.seq+1 {
		if err := w.sync(ctx); err == nil {
			return
		}
	}
	for _, ev := range evs {
		w.conv.fold(ev)
	}
}

func (w *worker) setProcessed(ctx context.Context, seq int64) {
	_, err := w.r.updateSession(ctx, w.id, func(s *store.ManagedSession) bool {
		if s.ProcessedSeq >= seq {
			return false
		}
		s.ProcessedSeq = seq
		return true
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		w.r.log.WarnContext(ctx, "session processed_seq", "session", w.id, "err", err)
	}
}

// abortTurn cancels the running turn, if any.
func (w *worker) abortTurn(cause error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.abort != nil {
		w.abort(cause)
	}
}

// waitTurn waits until no turn runs.
func (w *worker) waitTurn(ctx context.Context) {
	w.mu.Lock()
	done := w.turnDone
	w.mu.Unlock()
	if done == nil {
		return
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// selfHosted says whether the session's environment is self_hosted: its
// sandbox tools run on the workers of the environment's work queue.
func (w *worker) selfHosted(ctx context.Context, s *store.ManagedSession) (bool, error) {
	if w.hostedKnown || s.EnvironmentID == "" {
		return w.hosted, nil
	}
	env, err := w.r.cfg.Store.GetEnvironment(ctx, s.EnvironmentID)
	if errors.Is(err, store.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	w.hosted, w.hostedKnown = SelfHosted(env), true
	return w.hosted, nil
}

// ensureWork: a turn that waits for a worker's results (a self_hosted
// session's sandbox tools) makes sure a worker will come: the session has
// work in its environment's queue. Before the turn's idle event, so a
// crash in between finds it again when the turn is recovered.
func (w *worker) ensureWork(ctx context.Context, ts *turnState) error {
	if w.r.cfg.Work == nil || !w.conv.selfHosted {
		return nil
	}
	for _, cl := range w.conv.open {
		if cl.external && cl.waits() {
			s := ts.s
			if s.ThreadOf != "" {
				// A thread's calls are served by its session's worker
				// (they are cross-posted to the session's log).
				p, err := w.r.cfg.Store.GetManagedSession(ctx, s.ThreadOf)
				if err != nil {
					return fmt.Errorf("queue work: the thread's session: %w", err)
				}
				s = p
			}
			return w.r.cfg.Work.EnsureSession(ctx, s)
		}
	}
	return nil
}
