package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ExerciseLeases runs the LeaseStore contract (issue 16: several daemons on
// one store) and the fencing of the object writes (store.WithFences).
// newStore must return a fresh, empty store for each call and arrange its
// Close with t.Cleanup.
//
// Expiry is judged by the store's own clock, which the suite cannot move:
// a case that needs a lease to lapse gives it a 1ms ttl and has another
// node try to take it over until the store agrees it lapsed.
func ExerciseLeases(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	groups := []struct {
		name  string
		cases []leaseCase
	}{
		{"Leases", leaseCases},
		{"LeaseRaces", leaseRaceCases},
		{"Fencing", fenceCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					c.fn(&leaseEnv{ctx: ctx, t: t, s: newStore(t)})
				})
			}
		})
	}
}

type leaseCase struct {
	name string
	fn   func(e *leaseEnv)
}

type leaseEnv struct {
	ctx context.Context
	t   *testing.T
	s   store.Store
}

const (
	leaseTTL   = time.Minute
	leaseShort = time.Millisecond // lapses at once: the case then waits for the store to agree
	nodeA      = "node-a"
	nodeB      = "node-b"
	addrA      = "http://10.0.0.1:7420"
	addrB      = "http://10.0.0.2:7420"
)

// takeoverPatience bounds how long a case waits for a 1ms lease to lapse
// by the store's clock; it only fails a store that never lets it lapse.
const takeoverPatience = 30 * time.Second

var leaseCases = []leaseCase{
	{"AcquireFree", testLeaseAcquireFree},
	{"AcquireInvalid", testLeaseInvalid},
	{"ReacquireKeepsTokenAndExtends", testLeaseReacquire},
	{"HeldByAnotherNode", testLeaseHeld},
	{"ExpiredTakenOverWithLargerToken", testLeaseTakeover},
	{"RenewOnlyOwnLeases", testLeaseRenew},
	{"ReleaseOnlyWithCurrentToken", testLeaseRelease},
	{"TokensNeverReused", testLeaseTokensNeverReused},
}

func (e *leaseEnv) acquire(resource, node, addr string, ttl time.Duration) *store.Lease {
	e.t.Helper()
	l, err := e.s.AcquireLease(e.ctx, resource, node, addr, ttl)
	mustOK(e.t, err, fmt.Sprintf("AcquireLease(%q, %q)", resource, node))
	return l
}

func (e *leaseEnv) get(resource string) *store.Lease {
	e.t.Helper()
	l, err := e.s.GetLease(e.ctx, resource)
	mustOK(e.t, err, fmt.Sprintf("GetLease(%q)", resource))
	return l
}

// held asserts err is ErrLeaseHeld and returns the holder's lease.
func (e *leaseEnv) held(what string, l *store.Lease, err error) *store.Lease {
	e.t.Helper()
	mustErrIs(e.t, err, store.ErrLeaseHeld, what)
	if l == nil {
		e.t.Fatalf("%s: ErrLeaseHeld without the holder's lease", what)
	}
	return l
}

// takeOver has node acquire resource once its current lease lapsed by the
// store's clock (a 1ms lease: the first tries may still see it live).
func (e *leaseEnv) takeOver(resource, node, addr string, ttl time.Duration) *store.Lease {
	e.t.Helper()
	deadline := time.Now().Add(takeoverPatience)
	for {
		l, err := e.s.AcquireLease(e.ctx, resource, node, addr, ttl)
		if err == nil {
			return l
		}
		if !errors.Is(err, store.ErrLeaseHeld) || time.Now().After(deadline) {
			e.t.Fatalf("AcquireLease(%q, %q) waiting for the lease to lapse: %v", resource, node, err)
		}
		time.Sleep(time.Millisecond)
	}
}

func sameLease(t *testing.T, what string, got, want *store.Lease) {
	t.Helper()
	equal(t, what+" Resource", got.Resource, want.Resource)
	equal(t, what+" Node", got.Node, want.Node)
	equal(t, what+" Address", got.Address, want.Address)
	equal(t, what+" Token", got.Token, want.Token)
	objSameTime(t, what+" ExpiresAt", got.ExpiresAt, want.ExpiresAt)
	objSameTime(t, what+" AcquiredAt", got.AcquiredAt, want.AcquiredAt)
}

func testLeaseAcquireFree(e *leaseEnv) {
	r := store.NodeResource(nodeA)
	_, err := e.s.GetLease(e.ctx, r)
	mustErrIs(e.t, err, store.ErrNotFound, "GetLease before any acquire")

	l := e.acquire(r, nodeA, addrA, leaseTTL)
	equal(e.t, "Resource", l.Resource, r)
	equal(e.t, "Node", l.Node, nodeA)
	equal(e.t, "Address", l.Address, addrA)
	if l.Token <= 0 {
		e.t.Fatalf("Token = %d, want > 0", l.Token)
	}
	if l.AcquiredAt.IsZero() {
		e.t.Fatal("AcquiredAt is zero")
	}
	equal(e.t, "ExpiresAt - AcquiredAt", l.ExpiresAt.Sub(l.AcquiredAt), leaseTTL)
	sameLease(e.t, "read back", e.get(r), l)

	// Another resource is another lease.
	other := e.acquire(store.NodeResource(nodeB), nodeB, addrB, leaseTTL)
	if other.Token == l.Token {
		e.t.Fatalf("two resources got the same token %d", l.Token)
	}
	sameLease(e.t, "first lease after another's acquire", e.get(r), l)
}

func testLeaseInvalid(e *leaseEnv) {
	for _, c := range []struct {
		resource, node string
		ttl            time.Duration
	}{
		{"", nodeA, leaseTTL},
		{"object/t/c/id", "", leaseTTL},
		{"object/t/c/id", nodeA, 0},
		{"object/t/c/id", nodeA, -time.Second},
	} {
		_, err := e.s.AcquireLease(e.ctx, c.resource, c.node, addrA, c.ttl)
		mustErrIs(e.t, err, store.ErrInvalid, fmt.Sprintf("AcquireLease(%q, %q, ttl %s)", c.resource, c.node, c.ttl))
	}
	_, err := e.s.RenewLeases(e.ctx, "", leaseTTL)
	mustErrIs(e.t, err, store.ErrInvalid, "RenewLeases without a node")
	_, err = e.s.RenewLeases(e.ctx, nodeA, 0)
	mustErrIs(e.t, err, store.ErrInvalid, "RenewLeases with ttl 0")
	_, err = e.s.GetLease(e.ctx, "object/t/c/id")
	mustErrIs(e.t, err, store.ErrNotFound, "GetLease after refused acquires")
}

func testLeaseReacquire(e *leaseEnv) {
	r := store.ObjectResource(objKey("tnt_a", "counter", "c1"))
	first := e.acquire(r, nodeA, addrA, leaseTTL)
	again := e.acquire(r, nodeA, "http://10.0.0.9:7420", 2*leaseTTL)
	equal(e.t, "Token on re-acquire", again.Token, first.Token)
	equal(e.t, "Address on re-acquire", again.Address, "http://10.0.0.9:7420")
	objSameTime(e.t, "AcquiredAt on re-acquire", again.AcquiredAt, first.AcquiredAt)
	if !again.ExpiresAt.After(first.ExpiresAt) {
		e.t.Fatalf("re-acquire with a longer ttl: ExpiresAt %v, not after %v", again.ExpiresAt, first.ExpiresAt)
	}
	sameLease(e.t, "read back", e.get(r), again)
}

func testLeaseHeld(e *leaseEnv) {
	r := store.ObjectResource(objKey("tnt_a", "counter", "c1"))
	a := e.acquire(r, nodeA, addrA, leaseTTL)
	l, err := e.s.AcquireLease(e.ctx, r, nodeB, addrB, leaseTTL)
	sameLease(e.t, "holder returned to node b", e.held("AcquireLease by node b", l, err), a)
	sameLease(e.t, "lease after node b's try", e.get(r), a)
}

func testLeaseTakeover(e *leaseEnv) {
	r := store.ObjectResource(objKey("tnt_a", "counter", "c1"))
	a := e.acquire(r, nodeA, addrA, leaseShort)
	b := e.takeOver(r, nodeB, addrB, leaseTTL)
	equal(e.t, "Node after takeover", b.Node, nodeB)
	equal(e.t, "Address after takeover", b.Address, addrB)
	if b.Token <= a.Token {
		e.t.Fatalf("token after takeover %d, want > %d", b.Token, a.Token)
	}
	if b.AcquiredAt.Before(a.ExpiresAt) {
		e.t.Fatalf("taken over at %v, before the lease lapsed at %v", b.AcquiredAt, a.ExpiresAt)
	}
	equal(e.t, "ExpiresAt - AcquiredAt", b.ExpiresAt.Sub(b.AcquiredAt), leaseTTL)
	sameLease(e.t, "read back", e.get(r), b)

	// Node a, back, finds node b's lease.
	l, err := e.s.AcquireLease(e.ctx, r, nodeA, addrA, leaseTTL)
	sameLease(e.t, "holder returned to node a", e.held("AcquireLease by the old holder", l, err), b)
}

func testLeaseRenew(e *leaseEnv) {
	r1, r2 := store.ObjectResource(objKey("tnt_a", "counter", "c1")), store.NodeResource(nodeA)
	r3, lost := store.ObjectResource(objKey("tnt_a", "counter", "c3")), store.ObjectResource(objKey("tnt_a", "counter", "lost"))
	lapsing := store.ObjectResource(objKey("tnt_a", "counter", "lapsing"))
	a1, a2 := e.acquire(r1, nodeA, addrA, leaseTTL), e.acquire(r2, nodeA, addrA, leaseTTL)
	b3 := e.acquire(r3, nodeB, addrB, leaseTTL)
	e.acquire(lost, nodeA, addrA, leaseShort)
	bLost := e.takeOver(lost, nodeB, addrB, leaseTTL)
	// Lapsed or not, a lease no one took over is still node a's to renew.
	aLapsing := e.acquire(lapsing, nodeA, addrA, leaseShort)

	held, err := e.s.RenewLeases(e.ctx, nodeA, 2*leaseTTL)
	mustOK(e.t, err, "RenewLeases(node a)")
	want := map[string]int64{r1: a1.Token, r2: a2.Token, lapsing: aLapsing.Token}
	if len(held) != len(want) {
		e.t.Fatalf("RenewLeases(node a) = %+v, want the tokens %v", held, want)
	}
	for _, h := range held {
		tok, ok := want[h.Resource]
		if !ok || tok != h.Token {
			e.t.Fatalf("RenewLeases(node a) = %+v, want the tokens %v", held, want)
		}
	}
	for _, before := range []*store.Lease{a1, a2, aLapsing} {
		after := e.get(before.Resource)
		equal(e.t, before.Resource+" Token after renew", after.Token, before.Token)
		objSameTime(e.t, before.Resource+" AcquiredAt after renew", after.AcquiredAt, before.AcquiredAt)
		if !after.ExpiresAt.After(before.ExpiresAt) {
			e.t.Fatalf("%s: ExpiresAt after renew %v, not after %v", before.Resource, after.ExpiresAt, before.ExpiresAt)
		}
	}
	sameLease(e.t, "node b's lease after node a's renew", e.get(r3), b3)
	sameLease(e.t, "the lease node b took over, after node a's renew", e.get(lost), bLost)

	none, err := e.s.RenewLeases(e.ctx, "node-idle", leaseTTL)
	mustOK(e.t, err, "RenewLeases(a node without leases)")
	equal(e.t, "leases of a node without any", len(none), 0)
}

func testLeaseRelease(e *leaseEnv) {
	r := store.ObjectResource(objKey("tnt_a", "counter", "c1"))
	a := e.acquire(r, nodeA, addrA, leaseShort)
	b := e.takeOver(r, nodeB, addrB, leaseTTL)
	mustOK(e.t, e.s.ReleaseLease(e.ctx, r, a.Token), "ReleaseLease with the old holder's token")
	sameLease(e.t, "lease after a stale release", e.get(r), b)

	mustOK(e.t, e.s.ReleaseLease(e.ctx, r, b.Token), "ReleaseLease with the current token")
	_, err := e.s.GetLease(e.ctx, r)
	mustErrIs(e.t, err, store.ErrNotFound, "GetLease after release")
	mustOK(e.t, e.s.ReleaseLease(e.ctx, r, b.Token), "ReleaseLease of a lease no one holds")
	mustOK(e.t, e.s.ReleaseLease(e.ctx, "object/never/held/x", 1), "ReleaseLease of a resource never leased")

	// Released, it is free at once.
	c := e.acquire(r, nodeA, addrA, leaseTTL)
	equal(e.t, "Node after release and acquire", c.Node, nodeA)
}

// A release deletes the row; the next holder still gets a token greater
// than every token before, so no write fenced by an old token can pass.
func testLeaseTokensNeverReused(e *leaseEnv) {
	r := store.ObjectResource(objKey("tnt_a", "counter", "c1"))
	var last int64
	for i, node := range []string{nodeA, nodeB, nodeA, nodeA} {
		l := e.acquire(r, node, addrA, leaseTTL)
		if l.Token <= last {
			e.t.Fatalf("acquire %d (node %s) after a release: token %d, want > %d", i, node, l.Token, last)
		}
		last = l.Token
		mustOK(e.t, e.s.ReleaseLease(e.ctx, r, l.Token), fmt.Sprintf("ReleaseLease %d", i))
	}
}
