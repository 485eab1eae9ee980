package guest

import "sync"

// groupSync is group commit for one fsync target: a caller's sync returns
// once a sync that began after the call has ended, and one sync serves
// every caller that arrived while the one before it ran. Under
// concurrency N callers pay for about two fsyncs instead of N; a lone
// caller pays for one, as before.
type groupSync struct {
	mu      sync.Mutex
	cond    *sync.Cond
	running bool
	started uint64 // syncs begun
	ended   uint64 // the last sync that ended (they run one at a time)
	err     error  // its error
	// syncs counts the syncs run and waiting the callers waiting for
	// one (tests).
	syncs   uint64
	waiting int
}

// sync makes the caller's earlier writes durable through fn, run by this
// caller or shared with others. It returns the error of the sync that
// covered the call.
func (g *groupSync) sync(fn func() error) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cond == nil {
		g.cond = sync.NewCond(&g.mu)
	}
	// A sync already running may have begun before the caller's writes:
	// only one begun from now on covers them.
	need := g.started + 1
	for g.ended < need {
		if g.running {
			g.waiting++
			g.cond.Wait()
			g.waiting--
			continue
		}
		g.running = true
		g.started++
		mine := g.started
		g.syncs++
		g.mu.Unlock()
		err := fn()
		g.mu.Lock()
		g.running, g.ended, g.err = false, mine, err
		g.cond.Broadcast()
	}
	return g.err
}
