package storetest

import (
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// The work queue's races (issue 16): what one transaction per transition
// must settle.

// Concurrent EnsureSessionWork calls for one session create one item and
// all return it.
func testWorkEnsureRace(e *mgEnv) {
	const n = 20
	items := make([]*store.WorkItem, n)
	created := make([]bool, n)
	errs := make([]error, n)
	race(n, func(i int) {
		items[i], created[i], errs[i] = e.s.EnsureSessionWork(e.ctx, store.WorkItem{TenantID: mgTenant,
			EnvironmentID: workEnv, SessionID: "sesn_race"})
	})
	creators := 0
	for i := range n {
		mustOK(e.t, errs[i], fmt.Sprintf("racer %d", i))
		if created[i] {
			creators++
		}
		equal(e.t, fmt.Sprintf("racer %d's item", i), items[i].ID, items[0].ID)
	}
	equal(e.t, "racers that created", creators, 1)
	list, err := e.s.ListWork(e.ctx, mgTenant, workEnv, "", 100)
	mustOK(e.t, err, "ListWork")
	equal(e.t, "items", len(list), 1)
}

// N pollers racing over M items: every item is handed to exactly one.
func testWorkClaimRace(e *mgEnv) {
	const items, pollers = 30, 8
	want := map[string]bool{}
	for i := range items {
		want[e.ensureWork(fmt.Sprintf("sesn_cr_%02d", i), workAt(time.Duration(i)*time.Millisecond)).ID] = true
	}
	var mu sync.Mutex
	got := map[string]int{}
	errs := make([]error, pollers)
	race(pollers, func(i int) {
		for {
			w, err := e.claimWork(fmt.Sprintf("worker-%d", i), workAt(time.Minute), workReclaim)
			if errors.Is(err, store.ErrNotFound) {
				return
			}
			if err != nil {
				errs[i] = err
				return
			}
			mu.Lock()
			got[w.ID]++
			mu.Unlock()
		}
	})
	for i, err := range errs {
		mustOK(e.t, err, fmt.Sprintf("poller %d", i))
	}
	for id, n := range got {
		if !want[id] {
			e.t.Fatalf("claimed unknown item %q", id)
		}
		if n != 1 {
			e.t.Fatalf("item %q handed out %d times", id, n)
		}
	}
	equal(e.t, "items handed out", len(got), items)
}

// Racing acks of one item: one wins, the others conflict (several
// rounds, so that the racers overlap in some).
func testWorkAckRace(e *mgEnv) {
	const rounds, n = 10, 8
	for r := range rounds {
		w := e.ensureWork(fmt.Sprintf("sesn_ack_race_%02d", r), workAt(0))
		errs := make([]error, n)
		race(n, func(i int) {
			_, errs[i] = e.s.AckWork(e.ctx, mgTenant, workEnv, w.ID, workAt(time.Duration(i)*time.Second), workTTL)
		})
		winner := mgOneWinner(e, fmt.Sprintf("round %d: AckWork", r), errs, store.ErrConflict)
		timeIs(e, "AckedAt is the winner's", e.getWork(w.ID).AckedAt, workAt(time.Duration(winner)*time.Second))
	}
}

// Racing heartbeats naming one token: one extends the lease, the others
// find it gone (round after round, each naming the last winner's token).
func testWorkHeartbeatRace(e *mgEnv) {
	const rounds, n = 10, 8
	w := e.ensureWork("sesn_hb_race", workAt(0))
	e.ackWork(w.ID, workAt(0))
	tok := e.mustHeartbeat(w.ID, "", workAt(time.Second)).LeaseToken
	for r := range rounds {
		errs := make([]error, n)
		got := make([]*store.WorkItem, n)
		race(n, func(i int) {
			got[i], errs[i] = e.heartbeat(w.ID, tok, workAt(time.Duration(2+r)*time.Second))
		})
		winner := mgOneWinner(e, fmt.Sprintf("round %d: HeartbeatWork", r), errs, store.ErrLeaseLost)
		tok = got[winner].LeaseToken
		equal(e.t, "stored token is the winner's", e.getWork(w.ID).LeaseToken, tok)
	}
}
