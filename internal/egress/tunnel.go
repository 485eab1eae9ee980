package egress

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// connect answers a CONNECT: refused (403), tunnelled untouched, or, for
// a host with credentials, intercepted so its requests can be rewritten.
func (sb *sandboxServer) connect(w http.ResponseWriter, r *http.Request) {
	host, port, err := HostPort(r.Host, 443)
	if err != nil {
		textError(w, http.StatusBadRequest, "agentkernel egress: bad CONNECT target "+r.Host+": "+err.Error())
		return
	}
	pol, reason := sb.policy(r.Context(), host, port)
	if reason != "" {
		sb.refuse(w, pol, http.MethodConnect, host, port, reason)
		return
	}
	t, err := sb.target(r.Context(), pol, host, port)
	if err != nil {
		sb.upstreamError(w, pol, http.MethodConnect, host, port, err, nil)
		return
	}
	if len(pol.CredentialsFor(host, port)) > 0 {
		// Decided per request inside: the policy may change meanwhile.
		sb.intercept(w, host, port)
		return
	}
	up, err := sb.p.dial(r.Context(), t, t.named)
	if err != nil {
		sb.upstreamError(w, pol, http.MethodConnect, host, port, err, nil)
		return
	}
	sb.record(pol, http.MethodConnect, host, port, VerdictAllowed, "", nil)
	client, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !sb.track(client, up) {
		client.Close()
		up.Close()
		return
	}
	defer sb.untrack(client, up)
	defer client.Close()
	defer up.Close()
	if _, err := io.WriteString(client, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		return
	}
	sb.p.m.active.WithLabelValues("tunnel").Inc()
	defer sb.p.m.active.WithLabelValues("tunnel").Dec()
	sb.pipe(client, brw.Reader, up)
}

// upstreamError answers an error reaching the upstream: 403 when it is
// the internal-address rule, 502 naming the host and the reason otherwise.
func (sb *sandboxServer) upstreamError(w http.ResponseWriter, pol *Policy, method, host string, port int, err error, creds []Credential) {
	var ref *refusal
	if errors.As(err, &ref) {
		sb.refuse(w, pol, method, host, port, ref.reason)
		return
	}
	msg := redact(err.Error(), creds)
	sb.p.log.Warn("egress upstream failed", "sandbox", sb.id, "host", host, "port", port, "err", msg)
	textError(w, http.StatusBadGateway, "agentkernel egress: cannot reach "+hostPortString(host, port)+": "+msg)
}

// pipe copies both ways until both sides are done or the tunnel has been
// idle (no bytes either way) for IdleTimeout. A side that finishes
// sending half-closes the other, so request/response protocols that
// close their write side still get their answer.
func (sb *sandboxServer) pipe(client net.Conn, clientR io.Reader, up net.Conn) {
	var last atomic.Int64
	last.Store(time.Now().UnixNano())
	idle := sb.p.cfg.IdleTimeout
	done := make(chan error, 1)
	go func() {
		err := copyIdle(up, client, clientR, idle, &last, sb.p.m.bytes.WithLabelValues("out"))
		closeWrite(up)
		done <- err
	}()
	err := copyIdle(client, up, up, idle, &last, sb.p.m.bytes.WithLabelValues("in"))
	closeWrite(client)
	if err != nil { // not a clean end: do not wait for the other side
		client.Close()
		up.Close()
	}
	if err := <-done; err != nil {
		client.Close()
		up.Close()
	}
}

// copyIdle copies src (read through r, which may hold bytes already
// buffered from src) to dst. A read that times out ends the copy only
// when neither direction has moved a byte for idle.
func copyIdle(dst, src net.Conn, r io.Reader, idle time.Duration, last *atomic.Int64, n prometheus.Counter) error {
	buf := make([]byte, 32<<10)
	for {
		src.SetReadDeadline(time.Now().Add(idle))
		k, err := r.Read(buf)
		if k > 0 {
			last.Store(time.Now().UnixNano())
			dst.SetWriteDeadline(time.Now().Add(idle))
			if _, werr := dst.Write(buf[:k]); werr != nil {
				return werr
			}
			n.Add(float64(k))
		}
		switch {
		case err == nil:
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, os.ErrDeadlineExceeded) && time.Since(time.Unix(0, last.Load())) < idle:
		default:
			return err
		}
	}
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
	}
}

// intercept answers the CONNECT and terminates the tunnel here: TLS with
// a leaf for host from the CA, or plain HTTP when the client does not
// start a TLS handshake. The inner server then serves its requests.
func (sb *sandboxServer) intercept(w http.ResponseWriter, host string, port int) {
	conn, brw, err := http.NewResponseController(w).Hijack()
	if err != nil {
		return
	}
	if !sb.track(conn) {
		conn.Close()
		return
	}
	defer sb.untrack(conn)
	if _, err := io.WriteString(conn, "HTTP/1.1 200 Connection established\r\n\r\n"); err != nil {
		conn.Close()
		return
	}
	meta := &interceptMeta{host: host, port: port, scheme: "http"}
	bc := &bufConn{Conn: conn, r: brw.Reader}
	conn.SetReadDeadline(time.Now().Add(handshakeTimeout))
	first, err := brw.Reader.Peek(1)
	if err != nil {
		conn.Close()
		return
	}
	var c net.Conn = bc
	if first[0] == 0x16 { // a TLS handshake record
		tc := tls.Server(bc, sb.tlsConfig(host))
		ctx, cancel := context.WithTimeout(context.Background(), handshakeTimeout)
		err := tc.HandshakeContext(ctx)
		cancel()
		if err != nil {
			sb.p.log.Debug("egress intercepted handshake failed", "sandbox", sb.id, "host", host, "err", err)
			conn.Close()
			return
		}
		c, meta.scheme = tc, "https"
	}
	conn.SetReadDeadline(time.Time{})
	if !sb.innerL.push(&interceptedConn{Conn: c, meta: meta}) {
		conn.Close()
	}
}

type interceptKey struct{}

// interceptMeta is what an intercepted connection was opened for: its
// requests go there and nowhere else.
type interceptMeta struct {
	host   string
	port   int
	scheme string
}

type interceptedConn struct {
	net.Conn
	meta *interceptMeta
}

// bufConn reads through the hijacked connection's buffer first (a
// client may send its ClientHello right behind the CONNECT).
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufConn) Read(p []byte) (int, error) { return c.r.Read(p) }
