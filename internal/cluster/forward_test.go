package cluster

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// countingListener counts the writes to the connections it accepts.
type countingListener struct {
	net.Listener
	writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Write(b []byte) (int, error) {
	c.l.writes.Add(1)
	return c.Conn.Write(b)
}

// forwarder is a node that forwards every request to owner.
func forwarder(t *testing.T, owner string) (*httptest.Server, *countingListener) {
	t.Helper()
	n := New(Config{Node: "n2", TTL: time.Minute})
	front := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Forward(w, r, "object/t/c/x", Route{Node: "n1", Address: owner}, nil, func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		})
	}))
	cl := &countingListener{Listener: front.Listener}
	front.Listener = cl
	front.Start()
	t.Cleanup(front.Close)
	return front, cl
}

// A forwarded answer of known length goes back in one write, as the
// owner's own answer would: not its headers first and its body after (an
// extra write, and an extra wake-up of the client, per forwarded call).
func TestForwardAnswersInOneWrite(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"result":` + string(b) + `}`))
	}))
	defer owner.Close()
	front, cl := forwarder(t, owner.URL)
	const calls = 50
	for i := range calls {
		resp, err := front.Client().Post(front.URL+"/v1/objects/c/x/call", "application/json", strings.NewReader(`{"n":1}`))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != `{"result":{"n":1}}` || resp.ContentLength != int64(len(b)) {
			t.Fatalf("call %d: %d %q (content length %d)", i, resp.StatusCode, b, resp.ContentLength)
		}
	}
	if w := cl.writes.Load(); w != calls {
		t.Fatalf("%d writes to the client for %d forwarded answers; want one each", w, calls)
	}
}

// A stream (server-sent events) passes through a forward as it comes: the
// client reads the first event while the owner still holds the stream.
func TestForwardStreamsEvents(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	defer once.Do(func() { close(release) })
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: one\n\n")
		http.NewResponseController(w).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		_, _ = io.WriteString(w, "data: two\n\n")
	}))
	defer owner.Close()
	front, _ := forwarder(t, owner.URL)
	resp, err := front.Client().Get(front.URL + "/v1/sessions/s/stream")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	got := make(chan string, 1)
	go func() {
		line, _ := br.ReadString('\n')
		got <- line
	}()
	select {
	case line := <-got:
		if line != "data: one\n" {
			t.Fatalf("first line %q", line)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the first event did not pass through the forward while the stream was open")
	}
	once.Do(func() { close(release) })
	rest, _ := io.ReadAll(br)
	if string(rest) != "\ndata: two\n\n" {
		t.Fatalf("rest of the stream %q", rest)
	}
}

// fakeLeases is a lease store where "object/…" resources are held by
// node n1 for good; it counts the lookups of each.
type fakeLeases struct {
	owner    string
	mu       sync.Mutex
	acquired map[string]int
}

func (f *fakeLeases) AcquireLease(_ context.Context, resource, node, address string, _ time.Duration) (*store.Lease, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if strings.HasPrefix(resource, "object/") {
		f.acquired[resource]++
		return &store.Lease{Resource: resource, Node: "n1", Address: f.owner, Token: 1}, store.ErrLeaseHeld
	}
	return &store.Lease{Resource: resource, Node: node, Address: address, Token: 2}, nil
}

func (f *fakeLeases) RenewLeases(context.Context, string, time.Duration) ([]store.HeldLease, error) {
	return nil, nil
}

func (f *fakeLeases) GetLease(context.Context, string) (*store.Lease, error) {
	return nil, store.ErrNotFound
}

func (f *fakeLeases) ReleaseLease(context.Context, string, int64) error { return nil }

// A route to another node's object that forwards keep using is not looked
// up in the store again every third of the lease period, as long as the
// owner answers as the owner (its X-Agentkernel-Node); an answer that is
// not the owner's (an owner that no longer acts answers without it) does
// not keep the route, nor does an owner's error (a 503 of an owner cut off
// from the store: it kept a partitioned owner routed to for as long as
// requests came, its sessions unavailable long after its lease lapsed).
func TestForwardServedByTheOwnerKeepsTheRoute(t *testing.T) {
	owner := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.Contains(r.URL.Path, "/mute/") {
			w.Header().Set(NodeHeader, "n1")
		}
		if strings.Contains(r.URL.Path, "/cut/") {
			http.Error(w, "the store is unreachable", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "{}")
	}))
	defer owner.Close()
	leases := &fakeLeases{owner: owner.URL, acquired: map[string]int{}}
	const ttl = 900 * time.Millisecond
	n := New(Config{Store: leases, Node: "n2", Address: "http://n2", TTL: ttl})
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer n.Stop()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		res := "object/t/c/" + strings.TrimPrefix(r.URL.Path, "/")
		rt, err := n.Route(r.Context(), res)
		if err != nil || rt.Local {
			http.Error(w, fmt.Sprintf("route %+v, %v", rt, err), http.StatusInternalServerError)
			return
		}
		n.Forward(w, r, res, rt, nil, func(w http.ResponseWriter, r *http.Request, err error) {
			http.Error(w, err.Error(), http.StatusBadGateway)
		})
	}))
	defer front.Close()
	// Calls for four thirds of the period, to an object whose owner
	// answers as such and to one whose owner does not.
	deadline := time.Now().Add(4 * ttl / 3)
	for time.Now().Before(deadline) {
		for _, p := range []string{"/x", "/mute/y", "/cut/z"} {
			resp, err := front.Client().Get(front.URL + p)
			if err != nil {
				t.Fatal(err)
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if want := map[bool]int{false: 200, true: 503}[strings.HasPrefix(p, "/cut/")]; resp.StatusCode != want {
				t.Fatalf("%s: %d, want %d", p, resp.StatusCode, want)
			}
		}
		time.Sleep(5 * time.Millisecond)
	}
	leases.mu.Lock()
	defer leases.mu.Unlock()
	if got := leases.acquired["object/t/c/x"]; got != 1 {
		t.Errorf("the owner's lease was looked up %d times; want once (each forward it served confirmed it)", got)
	}
	if got := leases.acquired["object/t/c/mute/y"]; got < 3 {
		t.Errorf("an unconfirmed route was looked up %d times in four thirds of the period; want at least 3 (every third)", got)
	}
	if got := leases.acquired["object/t/c/cut/z"]; got < 3 {
		t.Errorf("a route whose owner answered errors was looked up %d times in four thirds of the period; want at least 3 (every third)", got)
	}
}
