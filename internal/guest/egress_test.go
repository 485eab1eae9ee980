package guest

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// echoOn serves an echo (until EOF) on l.
func echoOn(l net.Listener) {
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// roundTrip connects to addr, sends msg, half-closes and reads the answer.
func roundTrip(tb testing.TB, network, addr, msg string) string {
	tb.Helper()
	got, err := tryRoundTrip(network, addr, msg)
	if err != nil {
		tb.Fatal(err)
	}
	return got
}

// tryRoundTrip is roundTrip that returns what went wrong.
func tryRoundTrip(network, addr, msg string) (string, error) {
	c, err := net.Dial(network, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if _, err := io.WriteString(c, msg); err != nil {
		return "", err
	}
	_ = c.(interface{ CloseWrite() error }).CloseWrite()
	b, err := io.ReadAll(c)
	return string(b), err
}

// The forwarder copies both ways with half-closes, closes a client whose
// proxy socket is missing (the daemon restarting) and serves the socket
// again once it is back, and Close ends everything it forwards.
func TestEgressForwarder(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "proxy.sock")
	f, err := startEgress("127.0.0.1:0", sock, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	addr := f.ln.Addr().String()
	// Closed is closed: when "early" reaches the forwarder before it
	// closes, the kernel answers the unread bytes with a reset, not a FIN.
	if got, err := tryRoundTrip("tcp", addr, "early"); got != "" || (err != nil && !errors.Is(err, syscall.ECONNRESET) && !errors.Is(err, syscall.EPIPE)) {
		t.Fatalf("with no proxy socket the client got %q (%v), want its connection closed", got, err)
	}
	up, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	go echoOn(up)
	big := strings.Repeat("x", 1<<20)
	if got := roundTrip(t, "tcp", addr, big); got != big {
		t.Fatalf("forwarded %d bytes back, want %d", len(got), len(big))
	}
	// The daemon restarts: a new socket at the same path.
	up.Close()
	os.Remove(sock)
	up2, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer up2.Close()
	go echoOn(up2)
	if got := roundTrip(t, "tcp", addr, "again"); got != "again" {
		t.Fatalf("after the socket was re-created: %q", got)
	}
	// A connection held open is ended by Close.
	held, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	if _, err := io.WriteString(held, "ping"); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(held, buf); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if _, err := io.ReadAll(held); err != nil {
		t.Fatalf("a held connection after Close: %v", err)
	}
}

// BenchmarkEgressForward: one whole connection (connect, 4 bytes, half-
// close, read to EOF) to an echo server, directly over loopback TCP and
// through the forwarder to a unix socket — the hop every sandbox
// connection to the proxy takes.
func BenchmarkEgressForward(b *testing.B) {
	tcp, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer tcp.Close()
	go echoOn(tcp)
	sock := filepath.Join(b.TempDir(), "proxy.sock")
	up, err := net.Listen("unix", sock)
	if err != nil {
		b.Fatal(err)
	}
	defer up.Close()
	go echoOn(up)
	f, err := startEgress("127.0.0.1:0", sock, slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	for _, bc := range []struct{ name, addr string }{{"direct", tcp.Addr().String()}, {"forwarded", f.ln.Addr().String()}} {
		b.Run(bc.name, func(b *testing.B) {
			for b.Loop() {
				if got := roundTrip(b, "tcp", bc.addr, "ping"); got != "ping" {
					b.Fatalf("got %q", got)
				}
			}
		})
	}
}
