package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"time"
)

// ForwardedHeader marks a request one node forwarded to another, with the
// forwarding node's id. A forwarded request is never forwarded again: a
// node that does not own what it names answers 503 with NotOwnerHeader,
// and the forwarding node looks the owner up again.
const (
	ForwardedHeader = "X-Agentkernel-Forwarded-By"
	NotOwnerHeader  = "X-Agentkernel-Not-Owner"
)

// NodeHeader names, on an answer about something a node owns, the node
// that served it: the owner, which held the lease and acted when it took
// the request.
const NodeHeader = "X-Agentkernel-Node"

// ErrOwnerUnreachable: the node that owns what a request names did not
// answer its forward.
var ErrOwnerUnreachable = errors.New("the owner node is unreachable")

// maxRetryBody bounds the request body kept to send again when the owner
// moved under a forward; a larger one is sent once.
const maxRetryBody = 4 << 20

// forwardAttempts bounds the owners one request is forwarded to.
const forwardAttempts = 3

// transport is the connection pool to the other nodes: kept-alive
// connections, so a forward costs one local round trip, not a handshake.
var transport = &http.Transport{
	Proxy:               nil,
	DialContext:         (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
	MaxIdleConns:        256,
	MaxIdleConnsPerHost: 64,
	IdleConnTimeout:     90 * time.Second,
}

// Forward serves r at the node that owns resource: route is where it was
// last seen; when that node answers that it does not own it (it moved),
// the owner is looked up again and the request sent there, a few times at
// most. errFn writes an error answer.
func (n *Node) Forward(w http.ResponseWriter, r *http.Request, resource string, route Route, local http.HandlerFunc, errFn func(http.ResponseWriter, *http.Request, error)) {
	var body []byte
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength >= 0 && r.ContentLength <= maxRetryBody {
		b, err := io.ReadAll(io.LimitReader(r.Body, maxRetryBody+1))
		if err != nil {
			errFn(w, r, fmt.Errorf("read the request body: %w", err))
			return
		}
		body = b
	}
	for attempt := 1; ; attempt++ {
		last := attempt == forwardAttempts || (body == nil && r.ContentLength != 0)
		moved := n.forwardOnce(w, r, resource, route, body, last, errFn)
		if !moved {
			return
		}
		n.Forget(resource)
		var err error
		if route, err = n.Route(r.Context(), resource); err != nil {
			errFn(w, r, err)
			return
		}
		if route.Local {
			if body != nil {
				r.Body = io.NopCloser(bytes.NewReader(body))
			}
			local(w, r)
			return
		}
	}
}

// forwardOnce sends r to route's node. It returns true, having written
// nothing, when that node no longer owns the resource and last is false.
func (n *Node) forwardOnce(w http.ResponseWriter, r *http.Request, resource string, route Route, body []byte, last bool,
	errFn func(http.ResponseWriter, *http.Request, error)) (moved bool) {
	target, err := url.Parse(route.Address)
	if err != nil || target.Host == "" {
		errFn(w, r, fmt.Errorf("%w: node %s advertises no usable address (%q)", ErrOwnerUnreachable, route.Node, route.Address))
		return false
	}
	out := r.Clone(r.Context())
	if body != nil {
		out.Body = io.NopCloser(bytes.NewReader(body))
		out.ContentLength = int64(len(body))
	}
	errMoved := errors.New("moved")
	sent := time.Now()
	// No FlushInterval: streams (SSE, exec output, any answer of unknown
	// length) are flushed as they come by the proxy itself, and an answer
	// of known length goes back in one write. Flushing every answer at once
	// (-1) wrote its headers and its body apart: an extra write and client
	// wake-up per forwarded call.
	rp := &httputil.ReverseProxy{
		Transport: transport,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(target)
			pr.Out.Host = target.Host
			pr.Out.Header.Set(ForwardedHeader, n.cfg.Node)
		},
		ModifyResponse: func(resp *http.Response) error {
			if !last && resp.StatusCode == http.StatusServiceUnavailable && resp.Header.Get(NotOwnerHeader) != "" {
				resp.Body.Close()
				return errMoved
			}
			// Only an answer the owner could give confirms it: a 5xx (its
			// store cut off, say) says nothing of its lease, and confirming
			// on it kept a partitioned owner in the cache for as long as
			// requests came, its sessions unavailable long after the lease
			// lapsed.
			if resp.Header.Get(NodeHeader) == route.Node && resp.StatusCode < http.StatusInternalServerError {
				n.confirm(resource, route.Node, sent)
			}
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if errors.Is(err, errMoved) {
				moved = true
				return
			}
			if errors.Is(err, context.Canceled) {
				return
			}
			// The owner is unreachable: it may be dying, and its leases
			// lapse within the lease period.
			n.Forget(resource)
			errFn(w, r, fmt.Errorf("%w: node %s: %v; its work moves to another node within %s of its death", ErrOwnerUnreachable, route.Node, err, n.cfg.TTL))
		},
	}
	rp.ServeHTTP(w, out)
	return moved
}

// confirm keeps the cached route of resource to node for another third of
// the lease period from at: node served a request sent then as the owner
// (it held the lease and acted), which says as much as reading the lease
// row at that time would. A route in use is thus not looked up in the store
// again every third of the period (a transaction per object and node);
// a forward that finds the owner gone or moved drops it (Forget).
func (n *Node) confirm(resource, node string, at time.Time) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if r, ok := n.remote[resource]; ok && r.Node == node {
		if until := at.Add(n.cfg.TTL / 3); until.After(r.until) {
			r.until = until
			n.remote[resource] = r
		}
	}
}
