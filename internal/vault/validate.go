package vault

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/version"
)

// Validation verdicts (the SDK's BetaManagedAgentsCredentialValidationStatus).
const (
	Valid   = "valid"
	Invalid = "invalid"
	Unknown = "unknown"
)

// Validation is the result of probing an mcp_oauth credential against its
// MCP server (the SDK's BetaManagedAgentsCredentialValidation).
type Validation struct {
	CredentialID    string
	VaultID         string
	HasRefreshToken bool
	Status          string
	// Refresh is the refresh attempted, nil when none was.
	Refresh *RefreshOutcome
	// Probe is the MCP step that failed, nil when the probe succeeded or
	// there was no access token to test.
	Probe       *Probe
	ValidatedAt time.Time
}

// RefreshOutcome is how a refresh during validation went.
type RefreshOutcome struct {
	Status string
	HTTP   *HTTPResponse // when Status is RefreshFailed
}

// Probe is the failing step of an MCP probe.
type Probe struct {
	Method string        // initialize, tools/list
	HTTP   *HTTPResponse // nil when the server gave no HTTP error answer
}

// probeTimeout bounds one probe of an MCP server.
const probeTimeout = 20 * time.Second

// Validate refreshes the credential's access token if it is near expiry,
// then connects to its MCP server with it (the official MCP Go SDK's
// streamable HTTP client) and lists its tools. A 401 from the server
// makes it refresh once and probe again.
func (s *Service) Validate(ctx context.Context, c *store.VaultCredential) (*Validation, error) {
	doc, err := DecodeDoc(c)
	if err != nil {
		return nil, err
	}
	sec, err := s.Secrets(c)
	if err != nil {
		return nil, err
	}
	v := &Validation{CredentialID: c.ID, VaultID: c.VaultID, HasRefreshToken: doc.Auth.Refresh != nil && sec.RefreshToken != ""}
	defer func() { v.ValidatedAt = s.now() }()
	refresh := func(force bool) bool {
		_, fresh, err := s.Refresh(ctx, c.ID, force)
		var re *RefreshError
		switch {
		case errors.As(err, &re):
			v.Refresh = &RefreshOutcome{Status: re.Status, HTTP: re.HTTP}
			v.Status = Invalid
			if re.Status == RefreshConnectError {
				v.Status = Unknown
			}
			return false
		case err != nil:
			v.Refresh = &RefreshOutcome{Status: RefreshConnectError}
			v.Status = Unknown
			return false
		}
		v.Refresh = &RefreshOutcome{Status: RefreshSucceeded}
		sec = fresh
		return true
	}
	if s.needsRefresh(doc) && !refresh(false) {
		return v, nil
	}
	if sec.AccessToken == "" {
		v.Status = Invalid
		return v, nil
	}
	probe, unauthorized := s.probe(ctx, doc.Auth.MCPServerURL, sec)
	if unauthorized && v.HasRefreshToken && v.Refresh == nil {
		if !refresh(true) {
			return v, nil
		}
		probe, unauthorized = s.probe(ctx, doc.Auth.MCPServerURL, sec)
	}
	v.Probe = probe
	switch {
	case probe == nil:
		v.Status = Valid
	case unauthorized:
		v.Status = Invalid
	default:
		v.Status = Unknown
	}
	return v, nil
}

// probe connects and lists tools; it returns the failing step (nil on
// success) and whether the server refused the token (401 or 403).
func (s *Service) probe(ctx context.Context, serverURL string, sec Secrets) (*Probe, bool) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	rec := &recorder{base: s.client.Transport, token: sec.AccessToken, sec: sec}
	if rec.base == nil {
		rec.base = http.DefaultTransport
	}
	client := mcp.NewClient(&mcp.Implementation{Name: "agentkernel", Version: version.String()}, nil)
	tr := &mcp.StreamableClientTransport{Endpoint: serverURL, HTTPClient: &http.Client{Transport: rec}, MaxRetries: -1, DisableStandaloneSSE: true}
	fail := func(method string) (*Probe, bool) {
		h := rec.failure()
		return &Probe{Method: method, HTTP: h}, h != nil && (h.StatusCode == http.StatusUnauthorized || h.StatusCode == http.StatusForbidden)
	}
	session, err := client.Connect(ctx, tr, nil)
	if err != nil {
		return fail("initialize")
	}
	defer session.Close()
	if _, err := session.ListTools(ctx, nil); err != nil {
		return fail("tools/list")
	}
	return nil, false
}

// recorder adds the bearer token to the probe's requests and keeps the
// first HTTP error answer, scrubbed.
type recorder struct {
	base  http.RoundTripper
	token string
	sec   Secrets

	mu    sync.Mutex
	first *HTTPResponse
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	req.Header.Set("Authorization", "Bearer "+r.token)
	resp, err := r.base.RoundTrip(req)
	if err != nil || resp.StatusCode < 400 {
		return resp, err
	}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxCapturedBody+1))
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	r.mu.Lock()
	if r.first == nil {
		r.first = capture(resp, body, r.sec)
	}
	r.mu.Unlock()
	return resp, nil
}

func (r *recorder) failure() *HTTPResponse {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.first
}
