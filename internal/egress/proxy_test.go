package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

const secret = "sk-live-VERY-SECRET-0123456789"

func cred(hosts []HostPattern) Credential {
	return Credential{ID: "vcrd_api", EnvVar: "API_KEY", Placeholder: Placeholder("vcrd_api"), Value: secret,
		Header: true, Body: true, Hosts: hosts}
}

// A host without a credential is tunnelled untouched: the client
// completes TLS with the upstream itself and sees its certificate.
func TestConnectTunnelsUntouched(t *testing.T) {
	up := newUpstream(t, true)
	host, port := up.hostPort(t)
	reg := prometheus.NewRegistry()
	e := startProxy(t, fixed(&Policy{TenantID: "ten_1", SessionID: "sesn_1", Allow: allow(t, host+":"+strconv.Itoa(port))}), nil,
		func(c *Config) { c.Registry = reg })
	c := e.client(t, pool(up.Certificate()), false)
	resp, body := get(t, c, "POST", up.URL+"/tunnel", strings.NewReader(Placeholder("vcrd_x")), nil)
	if resp.StatusCode != 200 || body != "ok /tunnel" {
		t.Fatalf("through the tunnel: %s %q", resp.Status, body)
	}
	if !resp.TLS.PeerCertificates[0].Equal(up.Certificate()) {
		t.Errorf("the client saw %s, not the upstream's own certificate", resp.TLS.PeerCertificates[0].Subject)
	}
	if got := up.last(t).Body; got != Placeholder("vcrd_x") {
		t.Errorf("upstream got body %q, want it untouched", got)
	}
	ds := e.decisions()
	if len(ds) != 1 || ds[0].Verdict != VerdictAllowed || ds[0].Method != "CONNECT" || ds[0].Host != host || ds[0].Port != port ||
		ds[0].SandboxID != testSandbox || ds[0].TenantID != "ten_1" || ds[0].SessionID != "sesn_1" {
		t.Errorf("decisions = %+v, want one allowed CONNECT to %s:%d", ds, host, port)
	}
	if n := testutil.ToFloat64(e.proxy.m.decisions.WithLabelValues(VerdictAllowed)); n != 1 {
		t.Errorf("agentkernel_egress_decisions_total{verdict=allowed} = %v, want 1", n)
	}
	if n := testutil.ToFloat64(e.proxy.m.bytes.WithLabelValues("out")); n == 0 {
		t.Error("no tunnelled bytes counted")
	}
}

func TestRefusedHost(t *testing.T) {
	up := newUpstream(t, false)
	const describe = "environment env_1 networking limited (allowed_hosts: api.example.com)"
	e := startProxy(t, fixed(&Policy{Allow: allow(t, "api.example.com"), Describe: describe}), nil, nil)

	resp, body, _, _ := e.rawConnect(t, "api.evil.com:443")
	want := "agentkernel egress: api.evil.com:443 is not allowed by " + describe
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, want) {
		t.Errorf("CONNECT to a host the policy does not allow: %s %q, want 403 %q", resp.Status, body, want)
	}
	resp2, body2 := get(t, e.client(t, nil, false), "GET", up.URL+"/plain", nil, nil)
	host, port := up.hostPort(t)
	want2 := fmt.Sprintf("agentkernel egress: %s:%d is not allowed by %s", host, port, describe)
	if resp2.StatusCode != http.StatusForbidden || !strings.Contains(body2, want2) {
		t.Errorf("plain GET to a host the policy does not allow: %s %q, want 403 %q", resp2.Status, body2, want2)
	}
	if len(up.reqs) != 0 {
		t.Errorf("the refused upstream received %d requests", len(up.reqs))
	}
	ds := e.decisions()
	if len(ds) != 2 || ds[0].Verdict != VerdictRefused || ds[0].Host != "api.evil.com" || ds[1].Verdict != VerdictRefused || ds[1].Method != "GET" {
		t.Errorf("decisions = %+v, want two refusals", ds)
	}
}

// Plain HTTP proxying: absolute-form requests, keep-alive, chunked bodies.
func TestPlainHTTPAllowed(t *testing.T) {
	up := newUpstream(t, false)
	host, port := up.hostPort(t)
	e := startProxy(t, fixed(&Policy{Allow: allow(t, host+":"+strconv.Itoa(port))}), nil, nil)
	c := e.client(t, nil, true)
	for i := range 3 {
		resp, body := get(t, c, "POST", up.URL+"/p"+strconv.Itoa(i), io.MultiReader(strings.NewReader("chunk-"), strings.NewReader("ed")), nil)
		if resp.StatusCode != 200 || body != "ok /p"+strconv.Itoa(i) {
			t.Fatalf("plain POST %d: %s %q", i, resp.Status, body)
		}
		if s := up.last(t); s.Body != "chunk-ed" || s.Host != host+":"+strconv.Itoa(port) {
			t.Errorf("upstream saw %+v", s)
		}
	}
	if ds := e.decisions(); len(ds) != 3 || ds[2].Verdict != VerdictAllowed || ds[2].Method != "POST" {
		t.Errorf("decisions = %+v, want three allowed POSTs", ds)
	}
}

// A host with a credential is intercepted: the client trusts the proxy
// CA, the upstream gets the value where the client sent the placeholder.
func TestCredentialSubstitution(t *testing.T) {
	up := newUpstream(t, true)
	host, port := up.hostPort(t)
	hp := allow(t, host+":"+strconv.Itoa(port))
	e := startProxy(t, fixed(&Policy{Allow: hp, Credentials: []Credential{cred(hp)}}), pool(up.Certificate()), nil)
	c := e.client(t, caPool(t, e), true)
	ph := Placeholder("vcrd_api")

	small := strings.Repeat("x", 500) + ph + strings.Repeat("y", 500)
	resp, body := get(t, c, "POST", up.URL+"/small", strings.NewReader(small), http.Header{"Authorization": {"Bearer " + ph}})
	if resp.StatusCode != 200 || body != "ok /small" {
		t.Fatalf("substituted POST: %s %q", resp.Status, body)
	}
	if iss := resp.TLS.PeerCertificates[0].Issuer.CommonName; !strings.HasPrefix(iss, "agentkernel egress CA ") {
		t.Errorf("the client saw a certificate issued by %q, want the proxy CA", iss)
	}
	s := up.last(t)
	wantBody := strings.Replace(small, ph, secret, 1)
	if s.Auth != "Bearer "+secret || s.Body != wantBody || s.ContentLength != int64(len(wantBody)) || s.Chunked {
		t.Errorf("upstream saw auth %q, body len %d (CL %d, chunked %v); want the value in both and the exact length",
			s.Auth, len(s.Body), s.ContentLength, s.Chunked)
	}

	// A body too large to buffer is streamed; placeholders across read
	// boundaries are substituted all the same.
	var big strings.Builder
	for big.Len() < 3*maxBufferedBody {
		big.WriteString(strings.Repeat("z", 4093))
		big.WriteString(ph)
	}
	resp, _ = get(t, c, "PUT", up.URL+"/big", io.MultiReader(strings.NewReader(big.String())), nil)
	if resp.StatusCode != 200 {
		t.Fatalf("streamed PUT: %s", resp.Status)
	}
	if s := up.last(t); s.Body != strings.ReplaceAll(big.String(), ph, secret) || !s.Chunked {
		t.Errorf("streamed body: substituted correctly %v, chunked %v", s.Body == strings.ReplaceAll(big.String(), ph, secret), s.Chunked)
	}
	ds := e.decisions()
	if len(ds) != 2 || ds[0].Verdict != VerdictInjected || len(ds[0].Creds) != 1 || ds[0].Creds[0] != "vcrd_api" || ds[1].Verdict != VerdictInjected {
		t.Errorf("decisions = %+v, want two injected with vcrd_api", ds)
	}
	if strings.Contains(e.logs.String(), secret) {
		t.Error("the secret value is in the proxy's log")
	}
}

// A credential goes only to its own hosts; another allowed host is
// tunnelled untouched and keeps the placeholder.
func TestSubstitutionOnlyToCredentialHosts(t *testing.T) {
	own, other := newUpstream(t, true), newUpstream(t, true)
	oh, op := own.hostPort(t)
	xh, xp := other.hostPort(t)
	pol := &Policy{Allow: allow(t, oh+":"+strconv.Itoa(op), xh+":"+strconv.Itoa(xp)),
		Credentials: []Credential{cred(allow(t, oh+":"+strconv.Itoa(op)))}}
	e := startProxy(t, fixed(pol), pool(own.Certificate()), nil)
	ph := Placeholder("vcrd_api")
	c := e.client(t, pool(other.Certificate()), false)
	resp, _ := get(t, c, "POST", other.URL+"/x", strings.NewReader(ph), http.Header{"Authorization": {"Bearer " + ph}})
	if resp.StatusCode != 200 {
		t.Fatalf("to the other host: %s", resp.Status)
	}
	if s := other.last(t); s.Auth != "Bearer "+ph || s.Body != ph {
		t.Errorf("the other host saw auth %q body %q, want the placeholder untouched", s.Auth, s.Body)
	}
	if !resp.TLS.PeerCertificates[0].Equal(other.Certificate()) {
		t.Error("the other host was intercepted, not tunnelled")
	}
	if ds := e.decisions(); len(ds) != 1 || ds[0].Verdict != VerdictAllowed || ds[0].Creds != nil {
		t.Errorf("decisions = %+v, want one allowed without credentials", ds)
	}
}

// Inside an intercepted tunnel, a request naming another Host is refused:
// a shared front end could route it, with the credential, elsewhere.
func TestInterceptedHostMismatchRefused(t *testing.T) {
	up := newUpstream(t, true)
	host, port := up.hostPort(t)
	hp := allow(t, host+":"+strconv.Itoa(port))
	e := startProxy(t, fixed(&Policy{Allow: hp, Credentials: []Credential{cred(hp)}}), pool(up.Certificate()), nil)
	resp, _, conn, br := e.rawConnect(t, up.Listener.Addr().String())
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	tc := tls.Client(&bufConn{Conn: conn, r: br}, &tls.Config{RootCAs: caPool(t, e), ServerName: host})
	req, _ := http.NewRequest("GET", "https://other.example.com/", nil)
	req.Header.Set("Authorization", "Bearer "+Placeholder("vcrd_api"))
	if err := req.Write(tc); err != nil {
		t.Fatal(err)
	}
	r2, err := http.ReadResponse(bufio.NewReader(tc), req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(r2.Body)
	if r2.StatusCode != http.StatusForbidden || !strings.Contains(string(b), "other.example.com") {
		t.Errorf("Host mismatch: %s %q, want 403 naming the Host", r2.Status, b)
	}
	if len(up.reqs) != 0 {
		t.Error("the upstream received the mismatched request")
	}
}

// A name the policy allows that resolves to the daemon host's own
// addresses (DNS rebinding, the metadata address) is refused unless an
// Allow entry names it.
func TestInternalAddressRefused(t *testing.T) {
	up := newUpstream(t, false)
	_, port := up.hostPort(t)
	p := strconv.Itoa(port)
	lookup := func(_ context.Context, host string) ([]netip.Addr, error) {
		switch host {
		case "rebind.example.com", "named.example.com":
			return []netip.Addr{netip.MustParseAddr("127.0.0.1")}, nil
		case "meta.example.com":
			return []netip.Addr{netip.MustParseAddr("169.254.169.254")}, nil
		}
		return nil, errors.New("no such host")
	}
	pol := &Policy{Unrestricted: true, Allow: allow(t, "named.example.com:"+p), Describe: "environment env_1 networking unrestricted"}
	e := startProxy(t, fixed(pol), nil, func(c *Config) { c.LookupIP = lookup })

	for _, target := range []string{"rebind.example.com:" + p, "meta.example.com:443", "127.0.0.1:" + p, "[::1]:" + p, "localhost:" + p} {
		resp, body, _, _ := e.rawConnect(t, target)
		if resp.StatusCode != http.StatusForbidden {
			t.Errorf("CONNECT %s under Unrestricted: %s %q, want 403", target, resp.Status, body)
		}
	}
	c := e.client(t, nil, false)
	resp, body := get(t, c, "GET", "http://rebind.example.com:"+p+"/", nil, nil)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "resolves to 127.0.0.1") {
		t.Errorf("plain GET to a rebinding name: %s %q, want 403 saying it resolves to 127.0.0.1", resp.Status, body)
	}
	if len(up.reqs) != 0 {
		t.Fatalf("the daemon host's loopback was reached %d times", len(up.reqs))
	}
	resp, body = get(t, c, "GET", "http://named.example.com:"+p+"/named", nil, nil)
	if resp.StatusCode != 200 || body != "ok /named" {
		t.Errorf("a name allowed_hosts names explicitly: %s %q, want 200", resp.Status, body)
	}
	for _, d := range e.decisions()[:6] {
		if d.Verdict != VerdictRefused {
			t.Errorf("decision %+v, want refused", d)
		}
	}
}

func TestResolverErrorRefuses(t *testing.T) {
	for name, res := range map[string]Resolver{
		"error": ResolverFunc(func(context.Context, string) (*Policy, error) { return nil, errors.New("store down") }),
		"nil":   ResolverFunc(func(context.Context, string) (*Policy, error) { return nil, nil }),
	} {
		t.Run(name, func(t *testing.T) {
			up := newUpstream(t, false)
			e := startProxy(t, res, nil, nil)
			resp, body, _, _ := e.rawConnect(t, up.Listener.Addr().String())
			if resp.StatusCode != http.StatusForbidden || !strings.Contains(body, "no network policy for this sandbox") {
				t.Errorf("CONNECT without a policy: %s %q", resp.Status, body)
			}
			if strings.Contains(body, "store down") {
				t.Error("the resolver's internal error reached the sandbox")
			}
			if ds := e.decisions(); len(ds) != 1 || ds[0].Verdict != VerdictRefused {
				t.Errorf("decisions = %+v", ds)
			}
		})
	}
}

// The secret value appears in no log line and no response the sandbox
// gets, also when the upstream fails.
func TestSecretNeverLeaks(t *testing.T) {
	up := newUpstream(t, true)
	host, port := up.hostPort(t)
	hp := allow(t, host+":"+strconv.Itoa(port))
	// The proxy does not trust the upstream: its TLS fails with 502.
	e := startProxy(t, fixed(&Policy{Allow: hp, Credentials: []Credential{cred(hp)}}), pool(), nil)
	c := e.client(t, caPool(t, e), false)
	ph := Placeholder("vcrd_api")
	resp, body := get(t, c, "POST", up.URL+"/", strings.NewReader(ph), http.Header{"Authorization": {"Bearer " + ph}})
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, host+":"+strconv.Itoa(port)) || !strings.Contains(body, "certificate") {
		t.Errorf("upstream TLS failure: %s %q, want 502 naming the host and the certificate problem", resp.Status, body)
	}
	var all bytes.Buffer
	fmt.Fprint(&all, body, resp.Header, e.logs.String())
	fmt.Fprintf(&all, "%v %+v %#v %+v", cred(hp), cred(hp), cred(hp), e.decisions())
	if strings.Contains(all.String(), secret) {
		t.Errorf("the secret value leaked: %s", all.String())
	}
	if !strings.Contains(e.logs.String(), "egress upstream failed") {
		t.Error("the failure was not logged (the grep above would prove nothing)")
	}
}

// redact covers errors that quote what was sent upstream.
func TestRedact(t *testing.T) {
	got := redact("upstream said: bad key "+secret, []Credential{cred(nil)})
	if strings.Contains(got, secret) || !strings.Contains(got, "[redacted vcrd_api]") {
		t.Errorf("redact = %q", got)
	}
}

// An upstream that accepts and never answers: the tunnel ends after the
// idle timeout, and Close ends everything (goleak checks in TestMain).
func TestIdleTunnelCloses(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	held := make(chan net.Conn, 1)
	go func() {
		c, err := l.Accept()
		if err == nil {
			held <- c
		}
	}()
	e := startProxy(t, fixed(&Policy{Allow: allow(t, l.Addr().String())}), nil, func(c *Config) { c.IdleTimeout = 50e6 })
	resp, _, conn, br := e.rawConnect(t, l.Addr().String())
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	defer (<-held).Close()
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("read from an idle tunnel = %v, want EOF once the idle timeout closes it", err)
	}
	conn.Close()
}

// Close ends an active tunnel and makes Serve return.
func TestCloseEndsTunnels(t *testing.T) {
	up := newUpstream(t, true)
	e := startProxy(t, fixed(&Policy{Allow: allow(t, up.Listener.Addr().String())}), nil, nil)
	resp, _, _, br := e.rawConnect(t, up.Listener.Addr().String())
	if resp.StatusCode != 200 {
		t.Fatalf("CONNECT: %s", resp.Status)
	}
	e.proxy.Close()
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("read after Close = %v, want EOF", err)
	}
	if err := <-e.serve; !errors.Is(err, ErrClosed) {
		t.Errorf("Serve = %v, want ErrClosed", err)
	}
	e.serve <- ErrClosed // for the cleanup
}

// Serve returns nil when its listener is closed, and the identity is the
// listener's: two sandboxes on two sockets get their own policies.
func TestIdentityFromListener(t *testing.T) {
	up := newUpstream(t, false)
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	res := ResolverFunc(func(_ context.Context, id string) (*Policy, error) {
		if id == "sbx_open" {
			return &Policy{Allow: allow(t, up.Listener.Addr().String())}, nil
		}
		return &Policy{Describe: "nothing"}, nil
	})
	p, err := New(Config{CA: ca, Resolver: res})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	dir := t.TempDir()
	statuses := map[string]int{}
	for _, id := range []string{"sbx_open", "sbx_closed"} {
		l, err := net.Listen("unix", dir+"/"+id)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- p.Serve(l, id) }()
		e := &env{sock: dir + "/" + id}
		resp, _ := get(t, e.client(t, nil, false), "GET", up.URL+"/", nil, http.Header{"X-Sandbox": {"sbx_open"}})
		statuses[id] = resp.StatusCode
		l.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve after its listener closed = %v, want nil", err)
		}
	}
	if statuses["sbx_open"] != 200 || statuses["sbx_closed"] != 403 {
		t.Errorf("statuses = %v, want sbx_open 200 and sbx_closed 403", statuses)
	}
}
