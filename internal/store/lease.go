package store

import (
	"context"
	"errors"
	"time"
)

// Ownership leases (issue 16, SPEC §9). When several daemons share one
// store, each durable object (and each node's own liveness) is owned by one
// node through a lease row. A lease has a fencing token that grows every
// time the row changes holder, from one counter the store keeps (a
// Postgres sequence): a node that lost its lease and still writes carries
// a stale token, and the store refuses the write with ErrFenced.

// ErrLeaseHeld: another node holds the lease and it has not expired.
// AcquireLease returns the holder's lease with it.
var ErrLeaseHeld = errors.New("lease held by another node")

// ErrFenced: a write carried a fencing token that is no longer the
// resource's current one (another node took the resource over), or named a
// resource its fences do not cover. Nothing was written.
var ErrFenced = errors.New("fenced: the lease was taken over by another node")

// Lease is one resource's owner.
type Lease struct {
	// Resource names what is owned: ObjectResource, NodeResource.
	Resource string
	// Node is the holder's node id; Address is where other nodes reach
	// its API (the [cluster] advertise URL).
	Node    string
	Address string
	// Token is the fencing token: it changes (grows) with every change of
	// holder and stays the same while one node renews the lease.
	Token int64
	// ExpiresAt is the store's time when the lease lapses without renewal.
	ExpiresAt time.Time
	// AcquiredAt is when the current holder took it.
	AcquiredAt time.Time
}

// HeldLease is one lease a node still holds after RenewLeases.
type HeldLease struct {
	Resource string
	Token    int64
}

// LeaseStore holds leases. Expiry is judged by the store's clock (one
// clock for every node, so their clocks may disagree).
type LeaseStore interface {
	// AcquireLease gives resource to node (reachable at address) until the
	// store's now + ttl when it has no lease, when its lease expired, or
	// when node already holds it. A new holder gets a new token, greater
	// than any given before; a node that already held it keeps its token
	// (its address is updated). Held by another node and not expired: the
	// holder's lease and ErrLeaseHeld, nothing written.
	AcquireLease(ctx context.Context, resource, node, address string, ttl time.Duration) (*Lease, error)
	// RenewLeases extends every lease node holds (expired or not, as long
	// as no one took it over) to the store's now + ttl in one statement,
	// and returns them.
	RenewLeases(ctx context.Context, node string, ttl time.Duration) ([]HeldLease, error)
	// GetLease returns resource's lease (expired ones too); ErrNotFound
	// when it has none.
	GetLease(ctx context.Context, resource string) (*Lease, error)
	// ReleaseLease deletes resource's lease if its token is still token
	// (nil otherwise, and when there is none: someone else holds it, or no
	// one does).
	ReleaseLease(ctx context.Context, resource string, token int64) error
}

// ObjectResource names a durable object's lease.
func ObjectResource(k ObjectKey) string {
	return "object/" + k.TenantID + "/" + k.Class + "/" + k.ID
}

// NodeResource names a node's own lease: its liveness and its address
// (held while the node runs; other nodes look a node up by it).
func NodeResource(node string) string { return "node/" + node }

// Fences says, for a resource, the fencing token a write to it must carry:
// ok false means the caller does not own it (the write is refused).
type Fences func(resource string) (token int64, ok bool)

type fencesKey struct{}

// WithFences returns ctx carrying f. Every object write made with that
// context (ApplyStorageWrites, ApplyStorageWriteBatch, HibernateObject,
// ReplaceObjectStorage, SetObjectActive, MarkAlarmFired) checks, in its
// own transaction and before it writes, that the token f gives for the
// object's resource is the lease's current one, and keeps the lease row
// from changing holder until it commits; otherwise it fails with ErrFenced
// and writes nothing. Without fences (one daemon alone) nothing is checked.
func WithFences(ctx context.Context, f Fences) context.Context {
	return context.WithValue(ctx, fencesKey{}, f)
}

// FencesFrom returns the fences ctx carries (nil when none).
func FencesFrom(ctx context.Context) Fences {
	f, _ := ctx.Value(fencesKey{}).(Fences)
	return f
}
