package guest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"sync"
	"time"
)

// The egress forwarder: in a sandbox whose only way out is the daemon's
// egress proxy, the guest listens on the sandbox's own loopback
// (127.0.0.1:3128, where HTTP_PROXY points) and copies each connection to
// the proxy's unix socket, which the daemon bind-mounts read-only. The
// sandbox has no route to the host: this socket is the one path out, and
// the daemon knows the sandbox by the socket, not by anything sent on it.

// egressForwarder serves one listener.
type egressForwarder struct {
	ln     net.Listener
	socket string
	log    *slog.Logger
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// startEgress listens on addr and forwards to socket until Close.
func startEgress(addr, socket string, log *slog.Logger) (*egressForwarder, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("guest: egress listener %s: %w", addr, err)
	}
	f := &egressForwarder{ln: ln, socket: socket, log: log, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.accept()
	return f, nil
}

func (f *egressForwarder) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			f.log.Warn("guest: egress accept", "err", err)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		f.wg.Add(1)
		go f.forward(c)
	}
}

// forward copies one connection both ways, half-closing each direction
// as it ends. With the proxy's socket missing (the daemon restarting), the
// client's connection is closed and its retry finds the new one.
func (f *egressForwarder) forward(c net.Conn) {
	defer f.wg.Done()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	up, err := (&net.Dialer{}).DialContext(ctx, "unix", f.socket)
	cancel()
	if err != nil {
		c.Close()
		return
	}
	if !f.track(c, up) {
		return
	}
	defer f.untrack(c, up)
	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok {
			_ = cw.CloseWrite()
		} else {
			_ = dst.Close()
		}
		done <- struct{}{}
	}
	go pipe(up, c)
	go pipe(c, up)
	<-done
	<-done
}

func (f *egressForwarder) track(cs ...net.Conn) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.conns == nil { // closed
		for _, c := range cs {
			c.Close()
		}
		return false
	}
	for _, c := range cs {
		f.conns[c] = struct{}{}
	}
	return true
}

func (f *egressForwarder) untrack(cs ...net.Conn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range cs {
		c.Close()
		delete(f.conns, c)
	}
}

// Close stops accepting, ends every forwarded connection and waits.
func (f *egressForwarder) Close() {
	f.ln.Close()
	f.mu.Lock()
	for c := range f.conns {
		c.Close()
	}
	f.conns = nil
	f.mu.Unlock()
	f.wg.Wait()
}

// systemBundles are where images keep their trust store, first found wins.
var systemBundles = []string{
	"/etc/ssl/certs/ca-certificates.crt", // Debian, Ubuntu, Alpine
	"/etc/pki/tls/certs/ca-bundle.crt",   // Fedora, RHEL
	"/etc/ssl/cert.pem",                  // Alpine (LibreSSL), macOS-style
}

// composeCABundle writes out = the sandbox's own system bundle followed by
// the proxy's CA (appended, never replacing it), so TLS clients trust both
// the public roots and the proxy's certificates for intercepted hosts.
func composeCABundle(caFile, out string) error {
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return fmt.Errorf("guest: egress CA: %w", err)
	}
	var bundle []byte
	for _, p := range systemBundles {
		if b, err := os.ReadFile(p); err == nil {
			bundle = b
			break
		}
	}
	if len(bundle) > 0 && bundle[len(bundle)-1] != '\n' {
		bundle = append(bundle, '\n')
	}
	bundle = append(bundle, ca...)
	tmp := out + ".tmp"
	if err := os.WriteFile(tmp, bundle, 0o644); err != nil {
		return fmt.Errorf("guest: CA bundle: %w", err)
	}
	return os.Rename(tmp, out)
}
