// Package clock injects time. Background loops (reapers, pollers, sweepers)
// take a Clock so their tests drive time with a Fake instead of sleeping.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock is the time source of background loops.
type Clock interface {
	Now() time.Time
	// After delivers the time on the channel once d has passed.
	After(d time.Duration) <-chan time.Time
}

// Real is the wall clock.
type Real struct{}

func (Real) Now() time.Time                         { return time.Now() }
func (Real) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Fake is a manually advanced clock for tests.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	waiters []waiter
	// added is signalled whenever a goroutine starts waiting on After, so a
	// test can wait for a loop to reach its sleep before advancing.
	added chan struct{}
}

type waiter struct {
	at time.Time
	ch chan time.Time
}

// NewFake returns a fake clock at now.
func NewFake(now time.Time) *Fake {
	return &Fake{now: now, added: make(chan struct{}, 1024)}
}

func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *Fake) After(d time.Duration) <-chan time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	ch := make(chan time.Time, 1)
	if d <= 0 {
		ch <- f.now
		return ch
	}
	f.waiters = append(f.waiters, waiter{at: f.now.Add(d), ch: ch})
	select {
	case f.added <- struct{}{}:
	default:
	}
	return ch
}

// Advance moves time forward and fires every waiter that is due.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	now := f.now
	sort.Slice(f.waiters, func(i, j int) bool { return f.waiters[i].at.Before(f.waiters[j].at) })
	var keep []waiter
	for _, w := range f.waiters {
		if !w.at.After(now) {
			w.ch <- now
		} else {
			keep = append(keep, w)
		}
	}
	f.waiters = keep
	f.mu.Unlock()
}

// BlockUntilWaiting returns once at least n goroutines wait on After.
func (f *Fake) BlockUntilWaiting(n int) {
	for {
		f.mu.Lock()
		got := len(f.waiters)
		f.mu.Unlock()
		if got >= n {
			return
		}
		<-f.added
	}
}
