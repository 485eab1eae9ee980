// Package egress is agentkernel's outbound path (seed 000, "Outbound
// traffic"): one proxy per daemon that every sandbox reaches only through
// a socket its guest forwards, deciding per (tenant, session, sandbox)
// from the environment's network policy, and substituting vault
// credentials into requests so that a secret never exists inside a
// sandbox.
//
// This file is the contract between the parts: the policy the proxy
// enforces (built by the session layer from the environment, the agent
// and the session's vaults), the host patterns of allowed_hosts, and the
// decisions the proxy reports for metrics and the audit trail.
package egress

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Policy is what one sandbox may reach and what is injected on the way.
type Policy struct {
	TenantID  string
	SessionID string
	SandboxID string
	// Unrestricted allows every public host. Even then the daemon host's
	// loopback, link-local, unspecified and private addresses are reached
	// only when an Allow entry names them.
	Unrestricted bool
	// Allow are the hosts a limited policy reaches (allowed_hosts, plus
	// the agent's MCP servers and the package registries when the
	// environment allows them).
	Allow []HostPattern
	// Credentials are substituted into requests to their hosts.
	Credentials []Credential
	// Describe names the policy in a refusal, e.g. `environment env_… networking
	// limited (allowed_hosts: api.example.com)`. Never holds a secret.
	Describe string
}

// Credential is an environment_variable vault credential as the proxy
// uses it: the sandbox's environment holds Placeholder under EnvVar, and
// the proxy replaces Placeholder with Value in requests to Hosts.
type Credential struct {
	ID          string // vcrd_…: audit and metrics name it, never Value
	EnvVar      string // secret_name
	Placeholder string // Placeholder(ID)
	Value       string // the secret; never logged, never in an error
	Header      bool   // substitute in header values
	Body        bool   // substitute in the request body
	// Hosts are where the value may go; nil means every host the policy
	// allows (the credential's networking is unrestricted).
	Hosts []HostPattern
}

// String never shows the value.
func (c Credential) String() string {
	return fmt.Sprintf("credential %s (%s)", c.ID, c.EnvVar)
}

// GoString never shows the value either (%#v).
func (c Credential) GoString() string { return c.String() }

// PlaceholderPrefix starts every placeholder.
const PlaceholderPrefix = "agentkernel-placeholder-"

// Placeholder is what the sandbox sees in place of a credential's value:
// derived from the credential id only, so it is stable across sandboxes,
// restarts and rotations, and carries nothing of the secret.
func Placeholder(credentialID string) string { return PlaceholderPrefix + credentialID }

// Allows reports whether the policy lets a connection to host:port out.
// host is a name or an IP literal as the client asked (CONNECT authority
// or absolute URL), lowercased by the caller.
func (p *Policy) Allows(host string, port int) bool {
	if p == nil {
		return false
	}
	if matchAny(p.Allow, host, port) {
		return true
	}
	return p.Unrestricted && !Internal(host)
}

// CredentialsFor are the credentials whose value may be substituted into
// a request to host:port (the policy must allow the host too).
func (p *Policy) CredentialsFor(host string, port int) []Credential {
	if p == nil || !p.Allows(host, port) {
		return nil
	}
	var out []Credential
	for _, c := range p.Credentials {
		if c.Hosts == nil || matchAny(c.Hosts, host, port) {
			out = append(out, c)
		}
	}
	return out
}

// Internal reports whether host is an IP literal the daemon's host keeps
// to itself (see InternalAddr) or "localhost": reached only when named
// explicitly. The proxy applies the same rule to the
// addresses a name resolves to (a name that resolves to 127.0.0.1 is not
// a public host).
func Internal(host string) bool {
	if strings.EqualFold(host, "localhost") || strings.HasSuffix(strings.ToLower(host), ".localhost") {
		return true
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	if err != nil {
		return false
	}
	return InternalAddr(a)
}

// InternalAddr is Internal for a resolved address: loopback, link-local
// (the cloud metadata service among them), unspecified, and the private
// ranges of the daemon host's own network (10/8, 172.16/12, 192.168/16,
// fc00::/7, and the carrier-grade NAT 100.64/10) — "unrestricted" means
// the internet, not the host's LAN or VPC.
func InternalAddr(a netip.Addr) bool {
	a = a.Unmap()
	return a.IsLoopback() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified() ||
		a.IsPrivate() || cgnat.Contains(a)
}

var cgnat = netip.MustParsePrefix("100.64.0.0/10")

func matchAny(ps []HostPattern, host string, port int) bool {
	for _, hp := range ps {
		if hp.Match(host, port) {
			return true
		}
	}
	return false
}

// HostPattern is one allowed_hosts entry: a host name, a "*." wildcard
// (any subdomain, not the apex), or an IP literal, with an optional port.
// Without a port it allows 443 and 80.
type HostPattern struct {
	Host     string // lowercase; "*.example.com" for a wildcard; IPv6 without brackets
	Port     int    // 0 = 443 and 80
	Wildcard bool
}

// DefaultPorts are the ports an entry without a port allows.
var DefaultPorts = []int{443, 80}

// String is the entry as written canonically.
func (h HostPattern) String() string {
	host := h.Host
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if h.Port == 0 {
		return host
	}
	return host + ":" + strconv.Itoa(h.Port)
}

// Match reports whether host:port is allowed by the pattern.
func (h HostPattern) Match(host string, port int) bool {
	if h.Port == 0 && !slices.Contains(DefaultPorts, port) || h.Port != 0 && h.Port != port {
		return false
	}
	host = strings.TrimSuffix(strings.ToLower(strings.Trim(host, "[]")), ".")
	if h.Wildcard {
		suffix := strings.TrimPrefix(h.Host, "*")
		return strings.HasSuffix(host, suffix) && len(host) > len(suffix)
	}
	if a, err := netip.ParseAddr(host); err == nil {
		b, err := netip.ParseAddr(h.Host)
		return err == nil && a.Unmap() == b.Unmap()
	}
	return host == h.Host
}

// HostError is an allowed_hosts entry that is not a host.
type HostError struct {
	Entry  string
	Reason string
}

func (e *HostError) Error() string {
	return fmt.Sprintf("%q is not a host: %s (examples: api.example.com, *.example.com, 127.0.0.1:8443)", e.Entry, e.Reason)
}

// maxHostLen bounds an entry (a DNS name is at most 253 bytes, plus a port).
const maxHostLen = 260

// ParseHost reads one allowed_hosts entry. It refuses schemes, paths,
// user info, empty labels, bad ports and anything else that is not a host.
func ParseHost(entry string) (HostPattern, error) {
	bad := func(reason string) (HostPattern, error) {
		return HostPattern{}, &HostError{Entry: entry, Reason: reason}
	}
	s := strings.TrimSpace(entry)
	switch {
	case s == "":
		return bad("empty")
	case len(s) > maxHostLen:
		return bad(fmt.Sprintf("longer than %d bytes", maxHostLen))
	case strings.Contains(s, "://"):
		return bad("a URL; give the host only")
	case strings.ContainsAny(s, "/?#@ \t"):
		return bad("contains a path, query, user info or space; give the host only")
	}
	host, port := s, 0
	if strings.HasPrefix(s, "[") { // [v6] or [v6]:port
		end := strings.Index(s, "]")
		if end < 0 {
			return bad("unclosed [")
		}
		host = s[1:end]
		rest := s[end+1:]
		if rest != "" {
			if !strings.HasPrefix(rest, ":") {
				return bad("text after ]")
			}
			p, err := parsePort(rest[1:])
			if err != nil {
				return bad(err.Error())
			}
			port = p
		}
		a, err := netip.ParseAddr(host)
		if err != nil || !a.Is6() {
			return bad("not an IPv6 address in brackets")
		}
		return HostPattern{Host: a.String(), Port: port}, nil
	}
	if strings.Count(s, ":") > 1 {
		if a, err := netip.ParseAddr(s); err == nil {
			return HostPattern{Host: a.String()}, nil
		}
		return bad("an IPv6 address with a port must be in brackets, e.g. [::1]:8443")
	}
	if h, p, ok := strings.Cut(s, ":"); ok {
		pp, err := parsePort(p)
		if err != nil {
			return bad(err.Error())
		}
		host, port = h, pp
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if a, err := netip.ParseAddr(host); err == nil {
		return HostPattern{Host: a.String(), Port: port}, nil
	}
	wild := strings.HasPrefix(host, "*.")
	name := strings.TrimPrefix(host, "*.")
	if strings.Contains(name, "*") {
		return bad(`a wildcard is only "*." at the start`)
	}
	if err := checkName(name); err != nil {
		return bad(err.Error())
	}
	if wild && !strings.Contains(name, ".") {
		return bad("a wildcard needs at least two labels after it (*.example.com)")
	}
	return HostPattern{Host: host, Port: port, Wildcard: wild}, nil
}

// ParseHosts reads a list of entries; the error names the index.
func ParseHosts(entries []string) ([]HostPattern, error) {
	out := make([]HostPattern, 0, len(entries))
	for i, e := range entries {
		hp, err := ParseHost(e)
		if err != nil {
			return nil, &IndexedHostError{Index: i, Err: err.(*HostError)}
		}
		out = append(out, hp)
	}
	return out, nil
}

// IndexedHostError is a HostError at a position in a list.
type IndexedHostError struct {
	Index int
	Err   *HostError
}

func (e *IndexedHostError) Error() string { return fmt.Sprintf("[%d]: %v", e.Index, e.Err) }
func (e *IndexedHostError) Unwrap() error { return e.Err }

func parsePort(p string) (int, error) {
	n, err := strconv.Atoi(p)
	if err != nil || n < 1 || n > 65535 || strconv.Itoa(n) != p {
		return 0, fmt.Errorf("port %q is not a number from 1 to 65535", p)
	}
	return n, nil
}

// checkName checks a DNS name's syntax (letters, digits, hyphens and
// underscores in labels of 1–63 bytes).
func checkName(name string) error {
	if name == "" {
		return fmt.Errorf("no host name")
	}
	if len(name) > 253 {
		return fmt.Errorf("a host name is at most 253 bytes")
	}
	for _, label := range strings.Split(name, ".") {
		if label == "" || len(label) > 63 {
			return fmt.Errorf("label %q must be 1 to 63 bytes", label)
		}
		if label[0] == '-' || label[len(label)-1] == '-' {
			return fmt.Errorf("label %q starts or ends with a hyphen", label)
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return fmt.Errorf("label %q has %q (host names are ASCII letters, digits and hyphens; write IDNs in punycode)", label, r)
			}
		}
	}
	return nil
}

// PackageManagerHosts are the registries allow_package_managers opens.
var PackageManagerHosts = mustHosts(
	"pypi.org", "files.pythonhosted.org", // pip
	"registry.npmjs.org", "registry.yarnpkg.com", // npm
	"proxy.golang.org", "sum.golang.org", "storage.googleapis.com", // go
	"crates.io", "index.crates.io", "static.crates.io", // cargo
	"rubygems.org", "index.rubygems.org", // gem
	"deb.debian.org", "security.debian.org", "archive.ubuntu.com", "security.ubuntu.com", // apt
	"dl-cdn.alpinelinux.org",
)

func mustHosts(entries ...string) []HostPattern {
	hs, err := ParseHosts(entries)
	if err != nil {
		panic(err)
	}
	return hs
}

// Resolver gives the proxy a sandbox's current policy. It is asked on
// every new connection, so a change (vault_ids, the environment's
// networking, a refreshed token) applies from the next connection on.
// A sandbox it does not know gets ErrNoPolicy: everything is refused.
type Resolver interface {
	Resolve(ctx context.Context, sandboxID string) (*Policy, error)
}

// ErrNoPolicy: the sandbox has no policy (it belongs to no session), so
// nothing may leave it. A resolver's error wrapping it is shown to the
// sandbox as it is (it says why, and holds no secret); any other error is
// only logged.
var ErrNoPolicy = errors.New("no network policy")

// ResolverFunc adapts a function to Resolver.
type ResolverFunc func(ctx context.Context, sandboxID string) (*Policy, error)

// Resolve implements Resolver.
func (f ResolverFunc) Resolve(ctx context.Context, sandboxID string) (*Policy, error) {
	return f(ctx, sandboxID)
}

// Verdicts of a decision.
const (
	VerdictAllowed  = "allowed"
	VerdictRefused  = "refused"
	VerdictInjected = "injected" // allowed, with credentials substituted
)

// Decision is one thing the proxy decided: counted in /metrics and
// written to the session's audit trail. It never holds a secret value.
type Decision struct {
	At        time.Time
	TenantID  string
	SessionID string
	SandboxID string
	Method    string // CONNECT, or the proxied request's method
	Host      string
	Port      int
	Verdict   string
	Reason    string   // why refused, or "" when allowed
	Creds     []string // credential ids injected (VerdictInjected)
}

// Auditor receives every decision. It must not block the proxy for long.
type Auditor interface {
	Record(d Decision)
}

// AuditorFunc adapts a function to Auditor.
type AuditorFunc func(d Decision)

// Record implements Auditor.
func (f AuditorFunc) Record(d Decision) { f(d) }

// HostPort splits a CONNECT authority or URL host into a lowercased host
// and a port (defaultPort when absent).
func HostPort(authority string, defaultPort int) (string, int, error) {
	host, p, err := net.SplitHostPort(authority)
	if err != nil {
		host, p = strings.Trim(authority, "[]"), strconv.Itoa(defaultPort)
	}
	port, err := parsePort(p)
	if err != nil {
		return "", 0, err
	}
	if host == "" {
		return "", 0, fmt.Errorf("no host in %q", authority)
	}
	return strings.TrimSuffix(strings.ToLower(host), "."), port, nil
}
