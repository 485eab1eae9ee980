package cluster

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
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
