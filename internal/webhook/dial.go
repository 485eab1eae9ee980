package webhook

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/egress"
)

// guard is the SSRF rule of deliveries, the sandbox egress rule
// (egress.InternalAddr): a host resolves to public addresses only, unless
// the operator's allowed_hosts names it; loopback only with
// allow_loopback. The dialer resolves, checks each address, then connects
// to that address, so a name cannot be re-resolved to another one between
// the check and the connection (no DNS rebinding).
type guard struct {
	allowed  []egress.HostPattern
	loopback bool
	resolve  func(ctx context.Context, host string) ([]netip.Addr, error)
}

// errForbidden marks a refusal by the rule (not a network failure).
var errForbidden = errors.New("forbidden by the webhook egress rule")

func (g *guard) named(host string, port int) bool {
	for _, p := range g.allowed {
		if p.Match(host, port) {
			return true
		}
	}
	return false
}

// addrOK reports whether a resolved address may be reached.
func (g *guard) addrOK(a netip.Addr, named bool) bool {
	a = a.Unmap()
	if a.IsLoopback() {
		return g.loopback || named
	}
	return named || !egress.InternalAddr(a)
}

// checkHost is the registration-time check: an IP literal or localhost
// must be reachable under the rule (names are checked when resolved).
func (g *guard) checkHost(host string, port int) error {
	named := g.named(host, port)
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		if g.loopback || named {
			return nil
		}
		return fmt.Errorf("%s is loopback, which the operator does not allow (webhooks.allow_loopback)", host)
	}
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil && !g.addrOK(a, named) {
		return fmt.Errorf("%s is an internal address the operator does not allow (webhooks.allowed_hosts, webhooks.allow_loopback)", a)
	}
	return nil
}

// dial resolves addr's host, keeps the addresses the rule allows and
// connects to the first that answers.
func (g *guard) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	host, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, err
	}
	port, _ := strconv.Atoi(p)
	if err := g.checkHost(host, port); err != nil {
		return nil, fmt.Errorf("%w: %v", errForbidden, err)
	}
	var addrs []netip.Addr
	if a, err := netip.ParseAddr(strings.Trim(host, "[]")); err == nil {
		addrs = []netip.Addr{a}
	} else {
		resolve := g.resolve
		if resolve == nil {
			resolve = func(ctx context.Context, h string) ([]netip.Addr, error) {
				return net.DefaultResolver.LookupNetIP(ctx, "ip", h)
			}
		}
		if addrs, err = resolve(ctx, host); err != nil {
			return nil, fmt.Errorf("resolve %s: %w", host, err)
		}
	}
	named := g.named(host, port)
	var lastErr error
	for _, a := range addrs {
		if !g.addrOK(a, named) {
			lastErr = fmt.Errorf("%w: %s resolves to %s, an internal address the operator does not allow (webhooks.allowed_hosts, webhooks.allow_loopback)",
				errForbidden, host, a)
			continue
		}
		var d net.Dialer
		c, err := d.DialContext(ctx, network, netip.AddrPortFrom(a.Unmap(), uint16(port)).String())
		if err == nil {
			return c, nil
		}
		lastErr = err
	}
	if lastErr == nil {
		lastErr = fmt.Errorf("%s resolves to no address", host)
	}
	return nil, lastErr
}

// newClient sends deliveries through the guard: no proxy from the
// environment (it would bypass the rule) and no redirects (a redirect
// could point anywhere; a 3xx is a failed attempt).
func newClient(g *guard, timeout time.Duration) *http.Client {
	tr := &http.Transport{
		DialContext:           g.dial,
		ForceAttemptHTTP2:     true,
		MaxIdleConnsPerHost:   16,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   timeout,
		ResponseHeaderTimeout: timeout,
	}
	return &http.Client{Transport: tr, Timeout: timeout,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
}
