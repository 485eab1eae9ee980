// Package agentkernel is the Go SDK for agentkernel, the self-hosted durable
// runtime for AI agents. A Client talks to `agentkernel serve` over its REST
// API:
//
//	client := agentkernel.New()
//	keys, err := client.Keys.List(ctx)
//
// New takes the daemon's address from AGENTKERNEL_URL (default
// http://127.0.0.1:18888) and its API key from AGENTKERNEL_API_KEY, falling
// back to $AGENTKERNEL_HOME/admin.key when that file is readable. Options
// override both.
package agentkernel

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// DefaultURL is the daemon's embedded default address.
const DefaultURL = "http://127.0.0.1:18888"

// Client is an agentkernel API client. It is safe for concurrent use.
type Client struct {
	baseURL    string
	apiKey     string
	httpClient *http.Client
	userAgent  string

	// Keys manages API keys (admin).
	Keys *KeysService
	// Tenants manages tenants (admin).
	Tenants *TenantsService
	// Webhooks manages the tenant's webhook endpoints.
	Webhooks *WebhooksService
	// Sandboxes manages sandboxes.
	Sandboxes *SandboxesService
	// Objects calls and manages durable objects.
	Objects *ObjectsService
	// Sessions forks and rewinds Managed Agents sessions (the official
	// Anthropic SDKs drive the rest).
	Sessions *SessionsService
}

// Option configures a Client.
type Option func(*Client)

// WithBaseURL sets the daemon address, e.g. "http://127.0.0.1:18888".
func WithBaseURL(u string) Option { return func(c *Client) { c.baseURL = strings.TrimRight(u, "/") } }

// WithAPIKey sets the API key sent as x-api-key.
func WithAPIKey(k string) Option { return func(c *Client) { c.apiKey = k } }

// WithHTTPClient replaces the HTTP client (timeouts, transports, tests).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.httpClient = h } }

// WithHome reads the admin key from home/admin.key when no key is set
// otherwise (the default home is $AGENTKERNEL_HOME or
// ~/.local/share/agentkernel).
func WithHome(home string) Option {
	return func(c *Client) {
		if c.apiKey == "" {
			c.apiKey = readKeyFile(filepath.Join(home, "admin.key"))
		}
	}
}

// New returns a client configured from the environment and opts.
func New(opts ...Option) *Client {
	c := &Client{
		baseURL:    DefaultURL,
		httpClient: &http.Client{Timeout: 5 * time.Minute},
		userAgent:  "agentkernel-go",
	}
	if u := os.Getenv("AGENTKERNEL_URL"); u != "" {
		c.baseURL = strings.TrimRight(u, "/")
	}
	c.apiKey = os.Getenv("AGENTKERNEL_API_KEY")
	for _, o := range opts {
		o(c)
	}
	if c.apiKey == "" {
		c.apiKey = readKeyFile(filepath.Join(defaultHome(), "admin.key"))
	}
	c.httpClient = withoutRedirects(c.httpClient)
	c.Keys = &KeysService{c: c}
	c.Tenants = &TenantsService{c: c}
	c.Webhooks = &WebhooksService{c: c}
	c.Sandboxes = &SandboxesService{c: c}
	c.Objects = &ObjectsService{c: c}
	c.Sessions = &SessionsService{c: c}
	return c
}

// BaseURL returns the daemon address the client uses.
func (c *Client) BaseURL() string { return c.baseURL }

func defaultHome() string {
	if h := os.Getenv("AGENTKERNEL_HOME"); h != "" {
		return h
	}
	if h, err := os.UserHomeDir(); err == nil {
		return filepath.Join(h, ".local", "share", "agentkernel")
	}
	return ""
}

func readKeyFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// withoutRedirects returns a copy of h (the caller's client is left as it
// is) that hands 3xx answers back instead of following them; send then
// reports them as errors.
func withoutRedirects(h *http.Client) *http.Client {
	cp := *h
	cp.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return &cp
}

// pathSegment escapes one URL path segment. "." and ".." are escaped as
// well (%2E): sent literally, the daemon's router cleans them away and
// answers with a redirect, and the request no longer names what the
// caller named.
func pathSegment(s string) string {
	if s == "." || s == ".." {
		return strings.Repeat("%2E", len(s))
	}
	return url.PathEscape(s)
}

// send sends req and returns its 2xx response; a transport failure or any
// other status is an error (the body of an error answer is consumed).
func (c *Client) send(req *http.Request) (*http.Response, error) {
	resp, err := c.httpClient.Do(req)
	if err != nil {
		return nil, transportError(err)
	}
	if !ok(resp) {
		defer resp.Body.Close()
		return nil, decodeError(resp)
	}
	return resp, nil
}

// transportError is a request that got no answer. The *url.Error already
// names the method, the URL and the cause; only a hint is added.
func transportError(err error) error {
	if errors.Is(err, syscall.ECONNREFUSED) {
		return fmt.Errorf("%w (is `agentkernel serve` running there? set --url or AGENTKERNEL_URL)", err)
	}
	return err
}

// newRequest builds an authenticated request to path.
func (c *Client) newRequest(ctx context.Context, method, path string, body io.Reader) (*http.Request, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.baseURL+path, body)
	if err != nil {
		return nil, fmt.Errorf("request %s %s: %w", method, path, err)
	}
	req.Header.Set("User-Agent", c.userAgent)
	if c.apiKey != "" {
		req.Header.Set("x-api-key", c.apiKey)
	}
	return req, nil
}

// do sends a JSON request and decodes a JSON response into out (when non-nil).
func (c *Client) do(ctx context.Context, method, path string, in, out any) error {
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("encode the %s %s request: %w", method, path, err)
		}
		body = bytes.NewReader(b)
	}
	req, err := c.newRequest(ctx, method, path, body)
	if err != nil {
		return err
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	resp, err := c.send(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		return nil
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("decode the answer to %s %s: %w", method, path, err)
	}
	return nil
}

// Health reports whether the daemon answers /healthz (no key needed).
func (c *Client) Health(ctx context.Context) (*HealthInfo, error) {
	var h HealthInfo
	if err := c.do(ctx, http.MethodGet, "/healthz", nil, &h); err != nil {
		return nil, err
	}
	return &h, nil
}

// HealthInfo is the /healthz answer.
type HealthInfo struct {
	Status  string `json:"status"`
	Version string `json:"version"`
	Store   string `json:"store"`
}
