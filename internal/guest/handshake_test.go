package guest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A guest that does not know the sandbox's secret — another sandbox's
// guest, or anything else listening where the daemon dials — is refused by
// the daemon's client before any request is sent.
func TestDaemonClientRefusesAGuestWithoutTheSecret(t *testing.T) {
	_, work := startGuest(t, nil)
	sock := filepath.Join(filepath.Dir(work), "guest.sock")
	other := bytes.Repeat([]byte{9}, SecretSize)
	c := NewClient(UnixDialer(sock), other)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := c.Exec(ctx, ExecRequest{Argv: []string{"true"}}, nil); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("exec through a guest with another secret: %v, want ErrUnauthenticated", err)
	}

	// Something that is not a guest at all: it answers every connection
	// with an HTTP response that a guest would give.
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake.sock")
	ln, err := net.Listen("unix", fake)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conn.Read(make([]byte, 512))
			body := `{"ok":true,"pid":1,"uptime_ms":1}`
			io.WriteString(conn, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "+strconv.Itoa(len(body))+"\r\n\r\n"+body)
			conn.Close()
		}
	}()
	c2 := NewClient(UnixDialer(fake), testSecret)
	defer c2.Close()
	if h, err := c2.Health(ctx); !errors.Is(err, ErrUnauthenticated) {
		t.Fatalf("health from a socket that is no guest: %+v, %v; want ErrUnauthenticated", h, err)
	}
}

// The guest serves its daemon socket only to a client that proves the
// secret: plain HTTP, a wrong secret, or a recorded handshake replayed on a
// new connection get nothing.
func TestGuestRefusesAClientWithoutTheSecret(t *testing.T) {
	c, work := startGuest(t, nil)
	sock := filepath.Join(filepath.Dir(work), "guest.sock")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	plain := NewAgentClient(sock) // no handshake
	defer plain.Close()
	if _, err := plain.Health(ctx); err == nil {
		t.Fatal("the daemon's socket answered plain HTTP")
	}

	// Record what a real client sends on one connection…
	rec := &recorder{}
	relay := NewClient(func(ctx context.Context) (net.Conn, error) {
		conn, err := UnixDialer(sock)(ctx)
		if err != nil {
			return nil, err
		}
		return &recordingConn{Conn: conn, rec: rec}, nil
	}, testSecret)
	defer relay.Close()
	if _, err := relay.Health(ctx); err != nil {
		t.Fatalf("health through a recording relay: %v", err)
	}
	relay.Close()
	// …and replay it on a new one: the guest chose a new nonce, so the
	// recorded proof is worthless and no HTTP answer comes back.
	conn, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write(rec.bytes()); err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(conn)
	if bytes.Contains(got, []byte("HTTP/1.1")) {
		t.Fatalf("a replayed handshake got an answer: %q", got)
	}

	// The real client still works.
	if _, err := c.Health(ctx); err != nil {
		t.Fatal(err)
	}
}

// The agent socket takes agent events and nothing else.
func TestAgentSocketTakesOnlyAgentEvents(t *testing.T) {
	c, work := startGuest(t, nil)
	agent := NewAgentClient(filepath.Join(filepath.Dir(work), "agent.sock"))
	defer agent.Close()
	ctx := context.Background()
	if _, err := agent.PostAgentEvents(ctx, []AgentEvent{{Type: "agent.heartbeat", Status: "running"}}); err != nil {
		t.Fatalf("post an agent event: %v", err)
	}
	if _, err := agent.Exec(ctx, ExecRequest{Argv: []string{"true"}}, nil); err == nil {
		t.Fatal("the agent socket ran a command")
	}
	if _, err := agent.PullAgentEvents(ctx, 1, 0); err == nil {
		t.Fatal("the agent socket let an agent acknowledge (drop) events")
	}
	for _, path := range []string{"/health", "/files/content?path=x", "/processes", "/proxy/x"} {
		resp, err := agent.hc.Get("http://guest" + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode/100 == 2 {
			t.Errorf("agent socket answered GET %s with %d", path, resp.StatusCode)
		}
	}
	if evs, err := c.PullAgentEvents(ctx, 0, 0); err != nil || len(evs) != 1 {
		t.Fatalf("the daemon pulls %+v, %v; want the one event", evs, err)
	}
}

func TestSecretEncoding(t *testing.T) {
	s := NewSecret()
	got, err := ReadSecret(io.MultiReader(bytes.NewReader(EncodeSecret(s)), strings.NewReader("trailing data is not read")))
	if err != nil || !bytes.Equal(got, s) {
		t.Fatalf("round trip: %x, %v", got, err)
	}
	for _, bad := range []string{"", "\n", "abcd\n", strings.Repeat("zz", SecretSize) + "\n", strings.Repeat("ab", 4*SecretSize)} {
		if _, err := ReadSecret(strings.NewReader(bad)); err == nil {
			t.Errorf("ReadSecret(%q) accepted", bad)
		}
	}
}

type recorder struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (r *recorder) bytes() []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]byte(nil), r.buf.Bytes()...)
}

type recordingConn struct {
	net.Conn
	rec *recorder
}

func (c *recordingConn) Write(b []byte) (int, error) {
	c.rec.mu.Lock()
	c.rec.buf.Write(b)
	c.rec.mu.Unlock()
	return c.Conn.Write(b)
}

// BenchmarkConnection: GET /health on a kept-alive connection against one
// on a new connection, which pays for the connect and the handshake.
//
//	go test -run '^$' -bench Connection -benchtime 2000x ./internal/guest/
func BenchmarkConnection(b *testing.B) {
	c, _ := startGuest(b, nil)
	ctx := context.Background()
	b.Run("reused", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.Health(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("new", func(b *testing.B) {
		for b.Loop() {
			c.Close() // drop the idle connection
			if _, err := c.Health(ctx); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// Execs reuse one connection: each new one costs a connect and a
// handshake, so the client reads every answer to its end.
func TestExecReusesTheConnection(t *testing.T) {
	_, work := startGuest(t, nil)
	sock := filepath.Join(filepath.Dir(work), "guest.sock")
	var dials atomic.Int64
	c := NewClient(func(ctx context.Context) (net.Conn, error) {
		dials.Add(1)
		return UnixDialer(sock)(ctx)
	}, testSecret)
	defer c.Close()
	for range 20 {
		if res, err := c.Exec(context.Background(), ExecRequest{Argv: []string{"true"}}, nil); err != nil || res.ExitCode != 0 {
			t.Fatalf("exec: %+v %v", res, err)
		}
	}
	if n := dials.Load(); n != 1 {
		t.Fatalf("20 sequential execs opened %d connections, want 1", n)
	}
}
