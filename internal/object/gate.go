package object

import (
	"context"
	"sync"
)

// gate is a FIFO weighted semaphore: calls take 1 of size slots,
// transitions (hibernate, checkpoint, delete) take all of them. Waiters are
// served strictly in arrival order, so calls run in the order they came and
// a call that arrives during a hibernation runs after it.
type gate struct {
	mu      sync.Mutex
	size    int
	held    int
	waiters []*gateWaiter
}

type gateWaiter struct {
	n     int
	ready chan struct{}
}

func newGate(size int) *gate {
	if size < 1 {
		size = 1
	}
	return &gate{size: size}
}

// acquire waits for n slots (n > size means all of them).
func (g *gate) acquire(ctx context.Context, n int) error {
	g.mu.Lock()
	n = min(n, g.size)
	if len(g.waiters) == 0 && g.held+n <= g.size {
		g.held += n
		g.mu.Unlock()
		return nil
	}
	w := &gateWaiter{n: n, ready: make(chan struct{})}
	g.waiters = append(g.waiters, w)
	g.mu.Unlock()
	select {
	case <-w.ready:
		return nil
	case <-ctx.Done():
		g.mu.Lock()
		select {
		case <-w.ready:
			// Granted while we gave up: hand the slots back.
			g.held -= w.n
		default:
			for i, x := range g.waiters {
				if x == w {
					g.waiters = append(g.waiters[:i], g.waiters[i+1:]...)
					break
				}
			}
		}
		g.grantLocked()
		g.mu.Unlock()
		return ctx.Err()
	}
}

// tryAcquire takes n slots only if nobody holds or waits for them.
func (g *gate) tryAcquire(n int) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	n = min(n, g.size)
	if len(g.waiters) == 0 && g.held+n <= g.size {
		g.held += n
		return true
	}
	return false
}

func (g *gate) release(n int) {
	g.mu.Lock()
	g.held -= min(n, g.size)
	g.grantLocked()
	g.mu.Unlock()
}

// idle reports whether nobody holds or waits for the gate.
func (g *gate) idle() bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.held == 0 && len(g.waiters) == 0
}

// grantLocked wakes waiters from the front while they fit; a large waiter
// at the front blocks the ones behind it (FIFO).
func (g *gate) grantLocked() {
	for len(g.waiters) > 0 {
		w := g.waiters[0]
		if g.held+w.n > g.size {
			return
		}
		g.held += w.n
		g.waiters = g.waiters[1:]
		close(w.ready)
	}
}
