package egress

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Config configures a Proxy.
type Config struct {
	CA       *CA      // mints the certificates of intercepted hosts; required
	Resolver Resolver // a sandbox's current policy; required
	Auditor  Auditor  // every decision; nil records nothing
	Registry prometheus.Registerer
	// UpstreamRoots verify upstream servers of intercepted connections;
	// nil uses the system roots.
	UpstreamRoots *x509.CertPool
	Log           *slog.Logger
	// DialTimeout bounds one connect to an upstream (default 10s).
	DialTimeout time.Duration
	// IdleTimeout closes a tunnel, or a sandbox's keep-alive connection,
	// with no traffic in either direction for this long (default 5m).
	IdleTimeout time.Duration

	// Test seams: name lookup and dialing (defaults: the system resolver,
	// net.Dialer).
	LookupIP    func(ctx context.Context, host string) ([]netip.Addr, error)
	DialContext func(ctx context.Context, network, addr string) (net.Conn, error)
}

const (
	defaultDialTimeout = 10 * time.Second
	defaultIdleTimeout = 5 * time.Minute
	resolveTimeout     = 10 * time.Second
	handshakeTimeout   = 10 * time.Second
)

// Proxy is the daemon's egress proxy. One Proxy serves every sandbox;
// each sandbox has its own listener, and the listener alone says whose a
// connection is.
type Proxy struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	mu      sync.Mutex
	closed  bool
	servers map[*sandboxServer]struct{}
}

// ErrClosed is returned by Serve after Close.
var ErrClosed = errors.New("egress: proxy closed")

// New checks cfg and builds a proxy; it serves nothing until Serve.
func New(cfg Config) (*Proxy, error) {
	if cfg.CA == nil {
		return nil, errors.New("egress: Config.CA is required (LoadOrCreateCA)")
	}
	if cfg.Resolver == nil {
		return nil, errors.New("egress: Config.Resolver is required")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = defaultDialTimeout
	}
	if cfg.IdleTimeout <= 0 {
		cfg.IdleTimeout = defaultIdleTimeout
	}
	if cfg.LookupIP == nil {
		cfg.LookupIP = func(ctx context.Context, host string) ([]netip.Addr, error) {
			return net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		}
	}
	if cfg.DialContext == nil {
		cfg.DialContext = (&net.Dialer{}).DialContext
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, fmt.Errorf("egress: metrics: %w", err)
	}
	return &Proxy{cfg: cfg, log: cfg.Log, m: m, servers: map[*sandboxServer]struct{}{}}, nil
}

// CACertPEM is the certificate sandboxes trust for intercepted hosts.
func (p *Proxy) CACertPEM() []byte { return p.cfg.CA.CertPEM() }

// Serve serves sandboxID's listener until it is closed (nil) or the
// proxy is closed (ErrClosed). Every connection l accepts is that
// sandbox's: nothing the client sends can claim another identity. When
// Serve returns, the sandbox's connections and tunnels are closed.
func (p *Proxy) Serve(l net.Listener, sandboxID string) error {
	sb := p.newSandboxServer(sandboxID)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return ErrClosed
	}
	p.servers[sb] = struct{}{}
	p.mu.Unlock()
	err := sb.serve(l)
	sb.close()
	p.mu.Lock()
	delete(p.servers, sb)
	closed := p.closed
	p.mu.Unlock()
	switch {
	case closed:
		return ErrClosed
	case errors.Is(err, http.ErrServerClosed), errors.Is(err, net.ErrClosed):
		return nil
	}
	return err
}

// Close stops every Serve, closing all connections and tunnels, and
// returns once they are gone.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	servers := make([]*sandboxServer, 0, len(p.servers))
	for sb := range p.servers {
		servers = append(servers, sb)
	}
	p.mu.Unlock()
	for _, sb := range servers {
		sb.close()
	}
	return nil
}

// policy asks the resolver for the sandbox's current policy and decides
// host:port. reason is "" when allowed; otherwise it is what the sandbox
// is told.
func (sb *sandboxServer) policy(ctx context.Context, host string, port int) (*Policy, string) {
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	pol, err := sb.p.cfg.Resolver.Resolve(ctx, sb.id)
	switch {
	case errors.Is(err, ErrNoPolicy):
		sb.p.log.Debug("egress refused: no policy", "sandbox", sb.id, "err", err)
		return nil, "refused: " + err.Error()
	case err != nil:
		sb.p.log.Warn("egress policy unavailable", "sandbox", sb.id, "err", err)
		return nil, "refused: the daemon has no network policy for this sandbox (" + policyErrText(err) + ")"
	case pol == nil:
		return nil, "refused: the daemon has no network policy for this sandbox"
	case !pol.Allows(host, port):
		return pol, "not allowed by " + describe(pol)
	}
	return pol, ""
}

func policyErrText(err error) string {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return "the policy lookup timed out"
	}
	return "the policy lookup failed; see the daemon log"
}

func describe(pol *Policy) string {
	if pol.Describe != "" {
		return pol.Describe
	}
	return "this sandbox's network policy"
}

// target is an upstream whose addresses passed the internal-address
// rule; the dialer connects to these addresses, never to the name again.
type target struct {
	host  string
	port  int
	addrs []netip.Addr
	named bool // an Allow entry names host: its internal addresses may be dialed
}

type targetKey struct{}

// refusal is a decision against a connection made after the policy
// allowed its name (the name resolved to the daemon host's addresses).
type refusal struct{ reason string }

func (r *refusal) Error() string { return r.reason }

// target resolves host and keeps the addresses the policy may reach: an
// internal address only when an Allow entry names the host itself (not a
// wildcard, not Unrestricted), so DNS cannot point a public name at the
// daemon's loopback or the cloud metadata address.
func (sb *sandboxServer) target(ctx context.Context, pol *Policy, host string, port int) (*target, error) {
	t := &target{host: host, port: port, named: namedExplicitly(pol, host, port)}
	if a, err := netip.ParseAddr(host); err == nil {
		t.addrs = []netip.Addr{a.Unmap()}
	} else {
		ctx, cancel := context.WithTimeout(ctx, sb.p.cfg.DialTimeout)
		defer cancel()
		addrs, err := sb.p.cfg.LookupIP(ctx, host)
		if err != nil {
			return nil, fmt.Errorf("cannot resolve %s: %w", host, err)
		}
		t.addrs = addrs
	}
	if t.named {
		return t, nil
	}
	keep := slices.DeleteFunc(slices.Clone(t.addrs), InternalAddr)
	if len(keep) == 0 {
		if len(t.addrs) == 0 {
			return nil, fmt.Errorf("cannot resolve %s: no addresses", host)
		}
		return nil, &refusal{reason: fmt.Sprintf("refused: %s resolves to %s, an address of the daemon's host, reached only when allowed_hosts names %s",
			host, t.addrs[0], hostPortString(host, port))}
	}
	t.addrs = keep
	return t, nil
}

func namedExplicitly(pol *Policy, host string, port int) bool {
	for _, hp := range pol.Allow {
		if !hp.Wildcard && hp.Match(host, port) {
			return true
		}
	}
	return false
}

// dial connects to the first of t's addresses that answers.
func (p *Proxy) dial(ctx context.Context, t *target, allowInternal bool) (net.Conn, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.DialTimeout)
	defer cancel()
	err := error(&refusal{reason: fmt.Sprintf("refused: %s has no address this sandbox may reach", t.host)})
	for _, a := range t.addrs {
		if InternalAddr(a) && !allowInternal {
			continue
		}
		c, derr := p.cfg.DialContext(ctx, "tcp", netip.AddrPortFrom(a, uint16(t.port)).String())
		if derr == nil {
			return c, nil
		}
		err = derr
	}
	return nil, err
}

// record counts and audits one decision.
func (sb *sandboxServer) record(pol *Policy, method, host string, port int, verdict, reason string, creds []string) {
	d := Decision{At: time.Now(), SandboxID: sb.id, Method: method, Host: host, Port: port, Verdict: verdict, Reason: reason, Creds: creds}
	if pol != nil {
		d.TenantID, d.SessionID = pol.TenantID, pol.SessionID
	}
	sb.p.m.decisions.WithLabelValues(verdict).Inc()
	if verdict == VerdictRefused {
		sb.p.log.Info("egress refused", "sandbox", sb.id, "method", method, "host", host, "port", port, "reason", reason)
	} else {
		sb.p.log.Debug("egress "+verdict, "sandbox", sb.id, "method", method, "host", host, "port", port, "credentials", creds)
	}
	if sb.p.cfg.Auditor != nil {
		sb.p.cfg.Auditor.Record(d)
	}
}

// refuse answers 403 with what was refused and why, and records it.
func (sb *sandboxServer) refuse(w http.ResponseWriter, pol *Policy, method, host string, port int, reason string) {
	sb.record(pol, method, host, port, VerdictRefused, reason, nil)
	textError(w, http.StatusForbidden, fmt.Sprintf("agentkernel egress: %s is %s", hostPortString(host, port), reason))
}

// textError writes a plain-text error the sandbox's tools show as is.
func textError(w http.ResponseWriter, status int, msg string) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("Connection", "close")
	w.WriteHeader(status)
	fmt.Fprintln(w, msg)
}

func hostPortString(host string, port int) string { return net.JoinHostPort(host, strconv.Itoa(port)) }

// redact removes credential values from text that may reach a log or
// the sandbox (an upstream's error can quote what it was sent).
func redact(s string, creds []Credential) string {
	for _, c := range creds {
		if c.Value != "" {
			s = strings.ReplaceAll(s, c.Value, "[redacted "+c.ID+"]")
		}
	}
	return s
}
