package egress

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

// Every tunnel, intercepted connection and upstream round trip must end
// with the proxy.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// env is a proxy serving one sandbox's unix socket.
type env struct {
	proxy *Proxy
	sock  string
	logs  *syncBuffer
	mu    sync.Mutex
	decs  []Decision
	serve chan error
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func (e *env) decisions() []Decision {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Decision(nil), e.decs...)
}

const testSandbox = "sbx_test"

// startProxy serves a proxy for testSandbox with policy pol (or the
// resolver res when set), trusting roots upstream.
func startProxy(t testing.TB, res Resolver, roots *x509.CertPool, tweak func(*Config)) *env {
	t.Helper()
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &env{logs: &syncBuffer{}, serve: make(chan error, 1)}
	cfg := Config{
		CA:            ca,
		Resolver:      res,
		Auditor:       AuditorFunc(func(d Decision) { e.mu.Lock(); e.decs = append(e.decs, d); e.mu.Unlock() }),
		UpstreamRoots: roots,
		Log:           slog.New(slog.NewTextHandler(e.logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	e.proxy, err = New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e.sock = filepath.Join(t.TempDir(), "egress.sock")
	l, err := net.Listen("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	go func() { e.serve <- e.proxy.Serve(l, testSandbox) }()
	t.Cleanup(func() {
		e.proxy.Close()
		if err := <-e.serve; !errors.Is(err, ErrClosed) {
			t.Errorf("Serve after Close = %v, want ErrClosed", err)
		}
	})
	return e
}

// fixed resolves every sandbox to pol.
func fixed(pol *Policy) Resolver {
	return ResolverFunc(func(_ context.Context, id string) (*Policy, error) {
		if id != testSandbox {
			return nil, errors.New("unknown sandbox " + id)
		}
		return pol, nil
	})
}

// client goes through the proxy's unix socket, trusting roots.
func (e *env) client(t testing.TB, roots *x509.CertPool, keepAlive bool) *http.Client {
	tr := &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "egress.invalid"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", e.sock)
		},
		TLSClientConfig:   &tls.Config{RootCAs: roots},
		DisableKeepAlives: !keepAlive,
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// rawConnect sends a CONNECT on a fresh connection and returns the
// proxy's answer and the connection (open when the answer is 200).
func (e *env) rawConnect(t testing.TB, authority string) (*http.Response, string, net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("unix", e.sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, "CONNECT "+authority+" HTTP/1.1\r\nHost: "+authority+"\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	var body []byte
	if resp.StatusCode != http.StatusOK {
		body, _ = io.ReadAll(resp.Body)
	}
	return resp, string(body), c, br
}

func pool(certs ...*x509.Certificate) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range certs {
		p.AddCert(c)
	}
	return p
}

func caPool(t testing.TB, e *env) *x509.CertPool {
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(e.proxy.CACertPEM()) {
		t.Fatal("proxy CA PEM does not parse")
	}
	return p
}

// seen is what an upstream received.
type seen struct {
	Host          string
	Auth          string
	Body          string
	ContentLength int64
	Chunked       bool
}

// upstream is an httptest server that records each request and answers
// "ok <path>".
type upstream struct {
	*httptest.Server
	mu   sync.Mutex
	reqs []seen
}

func newUpstream(t testing.TB, useTLS bool) *upstream {
	u := &upstream{}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		u.mu.Lock()
		u.reqs = append(u.reqs, seen{Host: r.Host, Auth: r.Header.Get("Authorization"), Body: string(b),
			ContentLength: r.ContentLength, Chunked: len(r.TransferEncoding) > 0})
		u.mu.Unlock()
		io.WriteString(w, "ok "+r.URL.Path)
	})
	if useTLS {
		u.Server = httptest.NewTLSServer(h)
	} else {
		u.Server = httptest.NewServer(h)
	}
	t.Cleanup(u.Close)
	return u
}

func (u *upstream) last(t testing.TB) seen {
	t.Helper()
	u.mu.Lock()
	defer u.mu.Unlock()
	if len(u.reqs) == 0 {
		t.Fatal("the upstream received no request")
	}
	return u.reqs[len(u.reqs)-1]
}

func (u *upstream) hostPort(t testing.TB) (string, int) {
	h, p, err := net.SplitHostPort(u.Listener.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func allow(t testing.TB, entries ...string) []HostPattern {
	hs, err := ParseHosts(entries)
	if err != nil {
		t.Fatal(err)
	}
	return hs
}

func get(t testing.TB, c *http.Client, method, url string, body io.Reader, hdr http.Header) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, string(b)
}
