// Package cluster makes a daemon one node of several that share one store
// (issue 16, SPEC §9). What a node owns it owns under a lease row in the
// store (store.LeaseStore) with a fencing token: a Node acquires leases on
// demand, renews every lease it holds in one statement every third of the
// lease period, stops acting on them when it could not renew in time, and
// learns which ones another node took over. Other nodes reach the owner
// through its advertised address (Forward); the store refuses a write
// whose token is stale (store.WithFences), so a node that lost a lease
// cannot write over its new owner even if it does not know yet.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ErrNotActing: this node could not renew its leases within the lease
// period (its store is unreachable, say) and acts on nothing until it can.
var ErrNotActing = errors.New("this node lost contact with the store and acts on nothing until it renews its leases")

// Config configures a Node.
type Config struct {
	Store store.LeaseStore
	// Node is this node's id, Address its advertised base URL.
	Node    string
	Address string
	// TTL is the lease period.
	TTL time.Duration
	Log *slog.Logger
	// Lost is called (from the renewal loop) with each resource this node
	// held and another node took over.
	Lost func(resource string)
}

// Node is this daemon as a member of a cluster.
type Node struct {
	cfg Config

	mu sync.Mutex
	// held maps each resource this node holds to its lease.
	held map[string]heldLease
	// actUntil is when the leases this node holds may have lapsed: the
	// start of the last successful renewal plus TTL (the store's expiry
	// is at least that late, whatever the clocks say).
	actUntil time.Time
	// remote caches the holder of resources other nodes own.
	remote map[string]Route

	stop context.CancelFunc
	done chan struct{}
}

type heldLease struct {
	token int64
	// at is when this node got the lease: a renewal that started before
	// it cannot have returned it.
	at time.Time
}

// Route says where a resource is served.
type Route struct {
	// Local: this node owns the resource, with Token.
	Local bool
	Token int64
	// Fresh: this node just took the resource (it did not hold it before),
	// so whatever it kept in memory about it is stale.
	Fresh bool
	// Node and Address name the owner when it is another node.
	Node    string
	Address string
	until   time.Time
}

// New returns a Node; Start joins the cluster.
func New(cfg Config) *Node {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Node{cfg: cfg, held: map[string]heldLease{}, remote: map[string]Route{}}
}

// ID returns the node id.
func (n *Node) ID() string { return n.cfg.Node }

// TTL returns the lease period.
func (n *Node) TTL() time.Duration { return n.cfg.TTL }

// Start takes the node's own lease (its liveness and address; another
// node id's lease it cannot take, so two nodes never share an id in the
// store's eyes unless they are given the same one) and starts the renewal
// loop. It returns once the node acts.
func (n *Node) Start(ctx context.Context) error {
	start := time.Now()
	l, err := n.cfg.Store.AcquireLease(ctx, store.NodeResource(n.cfg.Node), n.cfg.Node, n.cfg.Address, n.cfg.TTL)
	if err != nil {
		return fmt.Errorf("cluster: take the lease of node %s: %w", n.cfg.Node, err)
	}
	// Whatever this node id held before (an earlier boot) is this node's
	// again: renew it all, so the first renewal tells which leases survive.
	held, err := n.cfg.Store.RenewLeases(ctx, n.cfg.Node, n.cfg.TTL)
	if err != nil {
		return fmt.Errorf("cluster: renew the leases of node %s: %w", n.cfg.Node, err)
	}
	n.mu.Lock()
	for _, h := range held {
		n.held[h.Resource] = heldLease{token: h.Token, at: start}
	}
	n.held[l.Resource] = heldLease{token: l.Token, at: start}
	n.actUntil = start.Add(n.cfg.TTL)
	n.mu.Unlock()
	ctx, n.stop = context.WithCancel(context.WithoutCancel(ctx))
	n.done = make(chan struct{})
	go n.renewLoop(ctx)
	n.cfg.Log.InfoContext(ctx, "joined the cluster", "node", n.cfg.Node, "address", n.cfg.Address,
		"lease_ttl", n.cfg.TTL, "leases", len(held))
	return nil
}

// Stop ends the renewal loop. The leases stay: they lapse after TTL, or the
// next boot of this node renews them.
func (n *Node) Stop() {
	if n.stop == nil {
		return
	}
	n.stop()
	<-n.done
}

func (n *Node) renewLoop(ctx context.Context) {
	defer close(n.done)
	t := time.NewTicker(n.cfg.TTL / 3)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		n.renew(ctx)
	}
}

// renew renews every lease this node holds and drops those another node
// took over.
func (n *Node) renew(ctx context.Context) {
	start := time.Now()
	rctx, cancel := context.WithDeadline(ctx, start.Add(n.cfg.TTL/3))
	held, err := n.cfg.Store.RenewLeases(rctx, n.cfg.Node, n.cfg.TTL)
	cancel()
	if err != nil {
		n.mu.Lock()
		lapsed := !time.Now().Before(n.actUntil)
		n.mu.Unlock()
		if ctx.Err() == nil {
			n.cfg.Log.WarnContext(ctx, "cluster: renew leases", "err", err, "acting", !lapsed)
		}
		return
	}
	still := make(map[string]int64, len(held))
	for _, h := range held {
		still[h.Resource] = h.Token
	}
	var lost []string
	n.mu.Lock()
	n.actUntil = start.Add(n.cfg.TTL)
	for res, h := range n.held {
		if tok, ok := still[res]; (!ok || tok != h.token) && h.at.Before(start) {
			delete(n.held, res)
			lost = append(lost, res)
		}
	}
	n.mu.Unlock()
	for _, res := range lost {
		n.cfg.Log.InfoContext(ctx, "cluster: lease taken over by another node", "resource", res)
		if n.cfg.Lost != nil {
			n.cfg.Lost(res)
		}
	}
}

// acting says whether this node's leases are certainly still its own.
func (n *Node) acting(now time.Time) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return now.Before(n.actUntil)
}

// Route says where resource is served: here (taking its lease when it is
// free or lapsed) or at the node that holds it. ErrNotActing when this
// node cannot act.
func (n *Node) Route(ctx context.Context, resource string) (Route, error) {
	now := time.Now()
	if !n.acting(now) {
		return Route{}, ErrNotActing
	}
	n.mu.Lock()
	if h, ok := n.held[resource]; ok {
		n.mu.Unlock()
		return Route{Local: true, Token: h.token}, nil
	}
	if r, ok := n.remote[resource]; ok && now.Before(r.until) {
		n.mu.Unlock()
		return r, nil
	}
	n.mu.Unlock()
	l, err := n.cfg.Store.AcquireLease(ctx, resource, n.cfg.Node, n.cfg.Address, n.cfg.TTL)
	switch {
	case errors.Is(err, store.ErrLeaseHeld) && l != nil:
		// Cached for a third of the period after it was read, or after
		// the owner last served a forward (confirm): a dead owner's
		// objects move within TTL, and a forward to a node that no
		// longer owns them drops the entry (Forget).
		r := Route{Node: l.Node, Address: l.Address, until: now.Add(n.cfg.TTL / 3)}
		n.mu.Lock()
		n.remote[resource] = r
		n.mu.Unlock()
		return r, nil
	case err != nil:
		return Route{}, err
	}
	n.mu.Lock()
	prev, had := n.held[resource]
	n.held[resource] = heldLease{token: l.Token, at: now}
	delete(n.remote, resource)
	n.mu.Unlock()
	return Route{Local: true, Token: l.Token, Fresh: !had || prev.token != l.Token}, nil
}

// Owns says whether this node holds resource's lease (as far as it knows)
// and may act on it.
func (n *Node) Owns(resource string) bool {
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.held[resource]
	return ok && now.Before(n.actUntil)
}

// Forget drops what this node cached about another node's resource (a
// forward found it elsewhere).
func (n *Node) Forget(resource string) {
	n.mu.Lock()
	delete(n.remote, resource)
	n.mu.Unlock()
}

// Release gives resource up (it was deleted): its lease goes, if this
// node still holds it.
func (n *Node) Release(ctx context.Context, resource string) error {
	n.mu.Lock()
	h, ok := n.held[resource]
	delete(n.held, resource)
	n.mu.Unlock()
	if !ok {
		return nil
	}
	return n.cfg.Store.ReleaseLease(ctx, resource, h.token)
}

// Fences are the tokens of the leases this node holds, for the store to
// check writes against (store.WithFences).
func (n *Node) Fences(resource string) (int64, bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	h, ok := n.held[resource]
	return h.token, ok
}

// Address returns the advertised address of a node ("" and ErrNotFound
// when it has no lease: it never joined).
func (n *Node) Address(ctx context.Context, node string) (string, error) {
	if node == n.cfg.Node {
		return n.cfg.Address, nil
	}
	l, err := n.cfg.Store.GetLease(ctx, store.NodeResource(node))
	if err != nil {
		return "", err
	}
	return l.Address, nil
}
