package egress

import (
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// sandboxServer serves one sandbox's listener. The outer server speaks
// the proxy protocol (CONNECT, absolute-form requests); the inner server
// serves the requests of intercepted CONNECT tunnels (hosts with
// credentials), whose connections it is handed after the TLS handshake.
type sandboxServer struct {
	p      *Proxy
	id     string
	outer  *http.Server
	inner  *http.Server
	innerL *chanListener
	// Upstream connections are pooled per sandbox and per whether the
	// daemon host's addresses may be dialed, so a connection opened for
	// an explicitly allowed internal host is never reused for a request
	// the internal-address rule would refuse.
	strict, named *http.Transport

	mu      sync.Mutex
	closed  bool
	tunnels map[net.Conn]struct{}
	wg      sync.WaitGroup
	once    sync.Once
}

func (p *Proxy) newSandboxServer(id string) *sandboxServer {
	sb := &sandboxServer{p: p, id: id, innerL: newChanListener(), tunnels: map[net.Conn]struct{}{}}
	errLog := slog.NewLogLogger(p.log.With("sandbox", id).Handler(), slog.LevelDebug)
	sb.outer = &http.Server{
		Handler:           http.HandlerFunc(sb.serveProxy),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       p.cfg.IdleTimeout,
		ErrorLog:          errLog,
	}
	sb.inner = &http.Server{
		Handler:           http.HandlerFunc(sb.serveIntercepted),
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       p.cfg.IdleTimeout,
		ErrorLog:          errLog,
		ConnContext: func(ctx context.Context, c net.Conn) context.Context {
			return context.WithValue(ctx, interceptKey{}, c.(*interceptedConn).meta)
		},
		ConnState: func(c net.Conn, s http.ConnState) {
			switch s {
			case http.StateNew:
				p.m.active.WithLabelValues("intercepted").Inc()
			case http.StateClosed, http.StateHijacked:
				p.m.active.WithLabelValues("intercepted").Dec()
			}
		},
	}
	sb.strict, sb.named = p.newTransport(false), p.newTransport(true)
	return sb
}

func (sb *sandboxServer) serve(l net.Listener) error {
	sb.wg.Add(1)
	go func() {
		defer sb.wg.Done()
		sb.inner.Serve(sb.innerL)
	}()
	return sb.outer.Serve(l)
}

// close closes the listener, every connection and tunnel of the sandbox,
// and waits for the tunnels to end.
func (sb *sandboxServer) close() {
	sb.once.Do(func() {
		sb.mu.Lock()
		sb.closed = true
		for c := range sb.tunnels {
			c.Close()
		}
		sb.mu.Unlock()
		sb.outer.Close()
		sb.inner.Close()
		sb.innerL.Close()
		sb.wg.Wait()
		sb.strict.CloseIdleConnections()
		sb.named.CloseIdleConnections()
	})
}

// track registers connections a handler owns after a hijack so close can
// end them and wait for the handler; false when the sandbox is already
// closing. The caller closes its connections and calls untrack.
func (sb *sandboxServer) track(cs ...net.Conn) bool {
	sb.mu.Lock()
	defer sb.mu.Unlock()
	if sb.closed {
		return false
	}
	for _, c := range cs {
		sb.tunnels[c] = struct{}{}
	}
	sb.wg.Add(1)
	return true
}

func (sb *sandboxServer) untrack(cs ...net.Conn) {
	sb.mu.Lock()
	for _, c := range cs {
		delete(sb.tunnels, c)
	}
	sb.mu.Unlock()
	sb.wg.Done()
}

// serveProxy is the proxy protocol: CONNECT, or an absolute-form request.
func (sb *sandboxServer) serveProxy(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodConnect {
		sb.connect(w, r)
		return
	}
	if !r.URL.IsAbs() || r.URL.Scheme != "http" || r.URL.Host == "" {
		textError(w, http.StatusBadRequest, "agentkernel egress: this is an HTTP proxy: send absolute-form http:// requests, or CONNECT host:port for https")
		return
	}
	host, port, err := HostPort(r.URL.Host, 80)
	if err != nil {
		textError(w, http.StatusBadRequest, "agentkernel egress: bad host in "+r.URL.Host+": "+err.Error())
		return
	}
	sb.forward(w, r, "http", host, port)
}

// tlsConfig presents a leaf for the CONNECT target (never for the SNI
// the client sends: the upstream is the CONNECT target).
func (sb *sandboxServer) tlsConfig(host string) *tls.Config {
	return &tls.Config{
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
		GetCertificate: func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			return sb.p.cfg.CA.Leaf(host)
		},
	}
}

// chanListener hands connections to the inner http.Server.
type chanListener struct {
	ch   chan net.Conn
	done chan struct{}
	once sync.Once
}

func newChanListener() *chanListener {
	return &chanListener{ch: make(chan net.Conn), done: make(chan struct{})}
}

func (l *chanListener) push(c net.Conn) bool {
	select {
	case l.ch <- c:
		return true
	case <-l.done:
		return false
	}
}

func (l *chanListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *chanListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *chanListener) Addr() net.Addr { return chanAddr{} }

type chanAddr struct{}

func (chanAddr) Network() string { return "egress" }
func (chanAddr) String() string  { return "intercepted" }
