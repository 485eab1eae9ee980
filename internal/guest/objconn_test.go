package guest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// objectServer serves on the loopback, echoing the path and body, and
// counts the connections it accepted.
func objectServer(t *testing.T) (addr string, conns *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns = new(atomic.Int64)
	hs := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, _ := io.ReadAll(r.Body)
			_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" "+string(body))
		}),
		ConnState: func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		},
	}
	go func() { _ = hs.Serve(ln) }()
	t.Cleanup(func() { hs.Close() })
	return ln.Addr().String(), conns
}

func guestConfig(t *testing.T, target string) Config {
	dir := t.TempDir()
	return Config{
		SocketPath: filepath.Join(dir, "guest.sock"), AgentSocketPath: filepath.Join(dir, "agent.sock"),
		Secret: testSecret, StateDir: filepath.Join(dir, "state"), WorkDir: dir, ProxyTarget: target,
	}
}

func post(t *testing.T, hc *http.Client, path, body string) string {
	t.Helper()
	resp, err := hc.Post("http://object"+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The daemon's object client gets a connection the guest dialed and keeps
// it: many calls, one connection, and it still reaches the server once the
// guest is gone (the guest is not on the call path).
func TestObjectClientKeepsAHandedOverConnection(t *testing.T) {
	addr, conns := objectServer(t)
	cfg := guestConfig(t, "http://"+addr)
	_, stop := serveGuest(t, cfg)
	defer stop()
	c := NewClient(UnixDialer(cfg.SocketPath), testSecret)
	defer c.Close()
	for i := range 20 {
		body := `{"n":` + strconv.Itoa(i) + `}`
		if got := post(t, c.ObjectClient(), "/increment", body); got != "POST /increment "+body {
			t.Fatalf("call %d: %q", i, got)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("20 calls took %d connections, want 1", n)
	}
	stop()
	if got := post(t, c.ObjectClient(), "/after", "x"); got != "POST /after x" {
		t.Fatalf("after the guest stopped: %q", got)
	}
	if c.noObjConn.Load() {
		t.Fatal("the client fell back to the proxy")
	}
}

// Nothing listening is a *TargetError saying so, not an answer.
func TestObjectClientRefused(t *testing.T) {
	c, _ := startGuest(t, func(cfg *Config) { cfg.ProxyTarget = "http://127.0.0.1:1" })
	_, err := c.ObjectClient().Get("http://object/__health")
	var te *TargetError
	if !errors.As(err, &te) || !te.Refused {
		t.Fatalf("err = %v, want a refused *TargetError", err)
	}
}

// A server that exits between calls closed the kept connection: the next
// request goes over a new one instead of being written into the dead one.
func TestObjectClientDropsAConnectionTheServerClosed(t *testing.T) {
	addr, conns := objectServer(t)
	c, _ := startGuest(t, func(cfg *Config) { cfg.ProxyTarget = "http://" + addr })
	post(t, c.ObjectClient(), "/a", "")
	c.obj.mu.Lock()
	if len(c.obj.idle) != 1 {
		c.obj.mu.Unlock()
		t.Fatalf("%d idle connections, want 1", len(c.obj.idle))
	}
	oc := c.obj.idle[0]
	c.obj.mu.Unlock()
	// Half-close our side: the server closes the connection, as an exiting
	// server's kernel does; wait until its end of stream has arrived.
	if err := oc.nc.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	_ = oc.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	var b [1]byte
	var n int
	var perr error
	if err := oc.raw.Read(func(fd uintptr) bool {
		n, _, perr = syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK)
		return perr != syscall.EAGAIN // else wait until readable
	}); err != nil || perr != nil || n != 0 {
		t.Fatalf("waiting for the server to close: %d %v %v", n, perr, err)
	}
	_ = oc.nc.SetReadDeadline(time.Time{})
	if got := post(t, c.ObjectClient(), "/b", "y"); got != "POST /b y" {
		t.Fatalf("after the server hung up: %q", got)
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d connections, want 2", n)
	}
}

// A guest from before POST /object/conn answers it with a 404: the client
// goes through /proxy/ from then on.
func TestObjectClientFallsBackToTheProxy(t *testing.T) {
	addr, _ := objectServer(t)
	cfg := guestConfig(t, "http://"+addr)
	srv, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	inner := srv.handler
	srv.handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == objectConnPath {
			http.NotFound(w, r)
			return
		}
		inner.ServeHTTP(w, r)
	})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}()
	c := NewClient(UnixDialer(cfg.SocketPath), testSecret)
	defer c.Close()
	waitHealthy(t, c)
	if got := post(t, c.ObjectClient(), "/m", "body"); got != "POST /m body" {
		t.Fatalf("through the proxy: %q", got)
	}
	if !c.noObjConn.Load() {
		t.Fatal("the client did not note that the guest cannot hand connections over")
	}
	if got := post(t, c.ObjectClient(), "/m2", "b2"); got != "POST /m2 b2" {
		t.Fatalf("second call through the proxy: %q", got)
	}
}

// A guest that hands over anything but one TCP connection to the loopback
// is refused, and every descriptor it sent is closed.
func TestObjectClientRefusesOtherDescriptors(t *testing.T) {
	for _, tc := range []struct {
		name string
		fds  func(t *testing.T) []int
		want string
	}{
		{"two", func(t *testing.T) []int { return pipeFDs(t) }, "sent 2 descriptors"},
		{"pipe", func(t *testing.T) []int {
			p := pipeFDs(t)
			syscall.Close(p[1])
			return p[:1]
		}, "non-socket"},
		{"unix-socket", func(t *testing.T) []int {
			p, err := syscall.Socketpair(syscall.AF_UNIX, syscall.SOCK_STREAM, 0)
			if err != nil {
				t.Fatal(err)
			}
			syscall.Close(p[1])
			return p[:1]
		}, "not a TCP connection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sock := filepath.Join(t.TempDir(), "g.sock")
			ln, err := net.Listen("unix", sock)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			fds := tc.fds(t)
			var sent []string // what the descriptors are, e.g. "pipe:[1234]"
			for _, fd := range fds {
				l, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(fd))
				if err != nil {
					t.Fatal(err)
				}
				sent = append(sent, l)
			}
			done := make(chan struct{})
			go func() {
				defer close(done)
				al := &authListener{Listener: ln, secret: testSecret, onFail: func(error) {}}
				conn, err := al.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
					return
				}
				_, _, _ = unixConnOf(conn).WriteMsgUnix([]byte{objConnFD}, syscall.UnixRights(fds...), nil)
				for _, fd := range fds {
					syscall.Close(fd)
				}
			}()
			c := NewClient(UnixDialer(sock), testSecret)
			_, err = c.ObjectClient().Get("http://object/__health")
			<-done
			c.Close()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			if open := openOf(t, sent); len(open) > 0 {
				t.Fatalf("descriptors the guest sent are still open: %v", open)
			}
		})
	}
}

func pipeFDs(t *testing.T) []int {
	var p [2]int
	if err := syscall.Pipe(p[:]); err != nil {
		t.Fatal(err)
	}
	return p[:]
}

// openOf lists this process's descriptors that refer to one of what.
func openOf(t *testing.T, what []string) []string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && slices.Contains(what, l) {
			out = append(out, e.Name()+" → "+l)
		}
	}
	return out
}

// The object's server is the tenant's code: endless headers or endless
// informational answers end the request with an error, within bounds.
func TestObjectClientBoundsTheAnswer(t *testing.T) {
	for _, tc := range []struct {
		name, head, repeat, want string
	}{
		{"endless-header", "HTTP/1.1 200 OK\r\nX-Pad: ", strings.Repeat("a", 64<<10), "headers are over"},
		{"endless-1xx", "", "HTTP/1.1 102 Processing\r\n\r\n", "informational"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			done := make(chan struct{})
			go func() {
				defer close(done)
				conn, err := ln.Accept()
				if err != nil {
					return
				}
				defer conn.Close()
				if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
					return
				}
				if _, err := io.WriteString(conn, tc.head); err != nil {
					return
				}
				for range 1000 { // 64 MiB of header at most: the client gives up long before
					if _, err := io.WriteString(conn, tc.repeat); err != nil {
						return
					}
				}
			}()
			c, _ := startGuest(t, func(cfg *Config) { cfg.ProxyTarget = "http://" + ln.Addr().String() })
			_, err = c.ObjectClient().Get("http://object/m")
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want one saying %q", err, tc.want)
			}
			ln.Close()
			<-done
		})
	}
}

// Closing an answer before its end does not read the rest of it.
func TestObjectClientCloseDoesNotDrain(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		conn, err := ln.Accept()
		if err != nil {
			return
		}
		defer conn.Close()
		if _, err := http.ReadRequest(bufio.NewReader(conn)); err != nil {
			return
		}
		// A body that never ends.
		if _, err := io.WriteString(conn, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"); err != nil {
			return
		}
		chunk := strconv.FormatInt(64<<10, 16) + "\r\n" + strings.Repeat("x", 64<<10) + "\r\n"
		for {
			if _, err := io.WriteString(conn, chunk); err != nil {
				return
			}
		}
	}()
	c, _ := startGuest(t, func(cfg *Config) { cfg.ProxyTarget = "http://" + ln.Addr().String() })
	resp, err := c.ObjectClient().Get("http://object/m")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(resp.Body, make([]byte, 1000)); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close() // would not return if it read on
	ln.Close()
	<-done
}
