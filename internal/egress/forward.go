package egress

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"strings"
	"time"
)

// maxBufferedBody: a request body up to this size with placeholders to
// substitute is rewritten whole and sent with its exact Content-Length;
// a larger or unsized one is streamed and sent chunked.
const maxBufferedBody = 64 << 10

// serveIntercepted serves a request inside an intercepted CONNECT. The
// request goes to the CONNECT target only: a Host header naming another
// host is refused, or a credential meant for one virtual host could be
// routed by a shared front end to another.
func (sb *sandboxServer) serveIntercepted(w http.ResponseWriter, r *http.Request) {
	meta := r.Context().Value(interceptKey{}).(*interceptMeta)
	defPort := 80
	if meta.scheme == "https" {
		defPort = 443
	}
	host, port, err := HostPort(r.Host, defPort)
	if err != nil || host != meta.host || port != meta.port {
		sb.refuse(w, nil, r.Method, meta.host, meta.port,
			fmt.Sprintf("refused: this connection was opened with CONNECT %s; a request with Host %q must open its own", hostPortString(meta.host, meta.port), r.Host))
		return
	}
	sb.forward(w, r, meta.scheme, meta.host, meta.port)
}

// forward decides one request and proxies it to scheme://host:port,
// substituting the credentials the policy has for that host.
func (sb *sandboxServer) forward(w http.ResponseWriter, r *http.Request, scheme, host string, port int) {
	pol, reason := sb.policy(r.Context(), host, port)
	if reason != "" {
		sb.refuse(w, pol, r.Method, host, port, reason)
		return
	}
	t, err := sb.target(r.Context(), pol, host, port)
	if err != nil {
		sb.upstreamError(w, pol, r.Method, host, port, err, nil)
		return
	}
	creds := pol.CredentialsFor(host, port)
	hdrSubs := substitutions(creds, func(c Credential) bool { return c.Header })
	bodySubs := substitutions(creds, func(c Credential) bool { return c.Body })
	used := map[string]bool{}

	if len(hdrSubs) > 0 {
		for _, vs := range r.Header {
			for i, v := range vs {
				vs[i] = string(replaceAll([]byte(v), hdrSubs, used))
			}
		}
	}
	if len(bodySubs) > 0 && r.Body != nil && r.Body != http.NoBody {
		if r.ContentLength >= 0 && r.ContentLength <= maxBufferedBody {
			b, err := io.ReadAll(io.LimitReader(r.Body, r.ContentLength))
			if err != nil {
				textError(w, http.StatusBadRequest, "agentkernel egress: reading the request body: "+err.Error())
				return
			}
			b = replaceAll(b, bodySubs, used)
			r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(b)), int64(len(b))
		} else {
			// Streamed: which placeholders occur is known only once the
			// body has been sent, so every body credential is reported.
			r.Body, r.ContentLength = newReplacingReader(r.Body, bodySubs), -1
			r.Header.Del("Content-Length")
			for _, s := range bodySubs {
				used[s.id] = true
			}
		}
	}
	ids := make([]string, 0, len(used))
	for id := range used {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	verdict := VerdictAllowed
	if len(ids) > 0 {
		verdict = VerdictInjected
	} else {
		ids = nil
	}
	sb.record(pol, r.Method, host, port, verdict, "", ids)

	tr := sb.strict
	if t.named {
		tr = sb.named
	}
	authority := hostPortString(host, port)
	if scheme == "https" && port == 443 || scheme == "http" && port == 80 {
		authority = strings.TrimSuffix(authority, ":"+strconv.Itoa(port)) // [v6] keeps its brackets
	}
	rp := &httputil.ReverseProxy{
		Transport: tr,
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = scheme
			pr.Out.URL.Host = authority
			pr.Out.Host = "" // the target's name, never the client's Host header
		},
		ErrorHandler: func(w http.ResponseWriter, r *http.Request, err error) {
			if r.Context().Err() != nil { // the sandbox went away
				return
			}
			sb.upstreamError(w, pol, r.Method, host, port, err, creds)
		},
		ErrorLog: sb.outer.ErrorLog,
	}
	rp.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), targetKey{}, t)))
}

// newTransport is an upstream client that dials only the addresses its
// request's target carries (already checked), never the name again.
func (p *Proxy) newTransport(allowInternal bool) *http.Transport {
	return &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			t, ok := ctx.Value(targetKey{}).(*target)
			if !ok {
				return nil, errors.New("egress: dial without a checked target")
			}
			return p.dial(ctx, t, allowInternal)
		},
		TLSClientConfig:     &tls.Config{RootCAs: p.cfg.UpstreamRoots, MinVersion: tls.VersionTLS12},
		TLSHandshakeTimeout: handshakeTimeout,
		IdleConnTimeout:     90 * time.Second,
		MaxIdleConnsPerHost: 16,
	}
}
