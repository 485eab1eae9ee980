package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// The lease races: of concurrent acquirers of a free or lapsed resource
// exactly one becomes the holder; every other gets ErrLeaseHeld and a live
// holder's lease.

var leaseRaceCases = []leaseCase{
	{"AcquireFreeOneWinner", testLeaseRaceFree},
	{"AcquireExpiredOneWinner", testLeaseRaceExpired},
}

const (
	leaseRacers = 8
	// leaseRounds races for that many resources, one after the other: a
	// lost race is a window of a few statements, one round may miss it.
	leaseRounds = 10
)

// warmUp has leaseRacers callers read at once, so that an engine with a
// connection pool has its connections open before the race: otherwise
// the first racer may be done while the others still connect, and the
// race is not run at all.
func (e *leaseEnv) warmUp() {
	e.t.Helper()
	errs := make([]error, leaseRacers)
	race(leaseRacers, func(i int) { _, errs[i] = e.s.GetLease(e.ctx, "warm-up") })
	for i, err := range errs {
		mustErrIs(e.t, err, store.ErrNotFound, fmt.Sprintf("warm-up read %d", i))
	}
}

// leaseRound races leaseRacers nodes for r and returns the winners' indexes
// and every call's lease and error.
func (e *leaseEnv) leaseRound(r string) (winners []int, leases []*store.Lease, errs []error) {
	leases, errs = make([]*store.Lease, leaseRacers), make([]error, leaseRacers)
	race(leaseRacers, func(i int) {
		leases[i], errs[i] = e.s.AcquireLease(e.ctx, r, fmt.Sprintf("node-%d", i), fmt.Sprintf("http://n%d", i), leaseTTL)
	})
	for i := range leaseRacers {
		switch {
		case errs[i] == nil:
			winners = append(winners, i)
		case !errors.Is(errs[i], store.ErrLeaseHeld):
			e.t.Fatalf("racer %d: %v", i, errs[i])
		case leases[i] == nil:
			e.t.Fatalf("racer %d: ErrLeaseHeld without the holder's lease", i)
		}
	}
	return winners, leases, errs
}

// checkOneWinner asserts winners is one racer and that every loser saw the
// winner's lease, or (oldHolder != nil) the old one still live.
func (e *leaseEnv) checkOneWinner(r string, winners []int, leases []*store.Lease, oldHolder *store.Lease) {
	e.t.Helper()
	if len(winners) != 1 {
		e.t.Fatalf("%d racers won %s (%v), want exactly one", len(winners), r, winners)
	}
	w := leases[winners[0]]
	equal(e.t, "winner's node", w.Node, fmt.Sprintf("node-%d", winners[0]))
	for i, l := range leases {
		if i == winners[0] {
			continue
		}
		if oldHolder != nil && l.Token == oldHolder.Token {
			sameLease(e.t, fmt.Sprintf("racer %d's holder (the old one, not lapsed yet for it)", i), l, oldHolder)
			continue
		}
		sameLease(e.t, fmt.Sprintf("racer %d's holder", i), l, w)
	}
	sameLease(e.t, "lease after the race", e.get(r), w)
}

func testLeaseRaceFree(e *leaseEnv) {
	e.warmUp()
	for round := range leaseRounds {
		r := store.ObjectResource(objKey("tnt_a", "counter", fmt.Sprintf("race-%d", round)))
		winners, leases, _ := e.leaseRound(r)
		e.checkOneWinner(r, winners, leases, nil)
	}
}

// The lapsed lease: rounds of racers until the store lets one take it
// over (the first rounds may still find the 1ms lease live); that round
// has exactly one winner, with a token greater than the old holder's.
func testLeaseRaceExpired(e *leaseEnv) {
	e.warmUp()
	for round := range leaseRounds {
		e.raceExpired(store.ObjectResource(objKey("tnt_a", "counter", fmt.Sprintf("race-%d", round))))
	}
}

func (e *leaseEnv) raceExpired(r string) {
	e.t.Helper()
	old := e.acquire(r, "node-old", addrA, leaseShort)
	deadline := time.Now().Add(takeoverPatience)
	for {
		winners, leases, _ := e.leaseRound(r)
		if len(winners) == 0 {
			for i, l := range leases {
				sameLease(e.t, fmt.Sprintf("racer %d's holder before the lapse", i), l, old)
			}
			if time.Now().After(deadline) {
				e.t.Fatalf("the 1ms lease of %s never lapsed", r)
			}
			time.Sleep(time.Millisecond)
			continue
		}
		e.checkOneWinner(r, winners, leases, old)
		if w := leases[winners[0]]; w.Token <= old.Token {
			e.t.Fatalf("winner's token %d, want > the old holder's %d", w.Token, old.Token)
		}
		return
	}
}
