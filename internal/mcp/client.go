// Package mcp is agentkernel's client of remote MCP servers (an agent's
// mcp_servers), on the official Go MCP SDK: connect to a URL server over
// streamable HTTP, falling back to the older HTTP+SSE transport when the
// server does not speak it (the MCP spec's backwards-compatibility rule),
// with an optional bearer token; list its tools; call one. Every step is
// bounded by a timeout and by the caller's context, so a server that is
// down, slow or broken gives an error the turn can hand to the model —
// never a stuck turn. The token never appears in a log line or an error.
package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentkernel/agentkernel/internal/version"
)

// Default bounds of each step.
const (
	DefaultConnectTimeout = 10 * time.Second
	DefaultCallTimeout    = 60 * time.Second
)

// ErrUnauthorized: the server refused the credentials (HTTP 401/403).
var ErrUnauthorized = errors.New("the MCP server refused the credentials (HTTP 401/403)")

// Options configure a connection.
type Options struct {
	// Token, when set, is sent as "Authorization: Bearer <token>".
	Token string
	// ConnectTimeout bounds connecting (initialize) and listing tools
	// (default DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// CallTimeout bounds one tool call (default DefaultCallTimeout).
	CallTimeout time.Duration
	// Transport is the base RoundTripper (default http.DefaultTransport).
	Transport http.RoundTripper
	Log       *slog.Logger
}

// Tool is one tool a server lists.
type Tool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// Result is a tool call's result: content blocks in the shape
// agent.mcp_tool_result events carry (text, image), and whether the tool
// reported an error.
type Result struct {
	Content []map[string]any `json:"content"`
	IsError bool             `json:"is_error"`
}

// Conn is one connection to one server.
type Conn struct {
	cs        *sdk.ClientSession
	cancel    context.CancelCauseFunc
	server    string // the URL without credentials or query, for errors
	transport string
	opts      Options
}

// Transport names the transport the connection uses: "streamable_http"
// or "sse".
func (c *Conn) Transport() string { return c.transport }

// Connect connects to the server at rawURL and initializes the session.
func Connect(ctx context.Context, rawURL string, opts Options) (*Conn, error) {
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.Transport == nil {
		opts.Transport = http.DefaultTransport
	}
	if opts.Log == nil {
		opts.Log = slog.New(slog.DiscardHandler)
	}
	shown, err := displayURL(rawURL)
	if err != nil {
		return nil, err
	}
	// The SSE transport keeps the context of Connect for its event stream,
	// so the connection gets a context of its own that only the timeout or
	// the caller's cancellation end while connecting, and Close ends after.
	cctx, cancel := context.WithCancelCause(context.WithoutCancel(ctx))
	timer := time.AfterFunc(opts.ConnectTimeout, func() { cancel(context.DeadlineExceeded) })
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	connected := false
	defer func() {
		timer.Stop()
		stop()
		if !connected {
			cancel(nil)
		}
	}()
	rt := &authTransport{base: opts.Transport, token: opts.Token}
	hc := &http.Client{Transport: rt}
	client := sdk.NewClient(&sdk.Implementation{Name: "agentkernel", Version: version.String()}, nil)
	cs, err := client.Connect(cctx, &sdk.StreamableClientTransport{
		Endpoint: rawURL, HTTPClient: hc, MaxRetries: -1, DisableStandaloneSSE: true,
	}, nil)
	if err == nil {
		connected = true
		return &Conn{cs: cs, cancel: cancel, server: shown, transport: "streamable_http", opts: opts}, nil
	}
	status := int(rt.lastPOST.Load())
	if status == http.StatusUnauthorized || status == http.StatusForbidden {
		return nil, fmt.Errorf("MCP server %s: %w", shown, ErrUnauthorized)
	}
	// Backwards compatibility (MCP spec, "Transports"): a 4xx to the
	// initialize POST means an old server; its SSE endpoint is the same URL.
	if status < 400 || status >= 500 || cctx.Err() != nil {
		return nil, fmt.Errorf("MCP server %s: connect: %w", shown, connectErr(cctx, err))
	}
	opts.Log.DebugContext(ctx, "MCP server does not speak streamable HTTP; trying SSE", "server", shown, "status", status)
	rt.lastGET.Store(0)
	cs, serr := client.Connect(cctx, &sdk.SSEClientTransport{Endpoint: rawURL, HTTPClient: hc}, nil)
	if serr != nil {
		if s := rt.lastGET.Load(); s == http.StatusUnauthorized || s == http.StatusForbidden {
			return nil, fmt.Errorf("MCP server %s: %w", shown, ErrUnauthorized)
		}
		return nil, fmt.Errorf("MCP server %s: connect (streamable HTTP: HTTP %d; SSE: %w)", shown, status, connectErr(cctx, serr))
	}
	connected = true
	return &Conn{cs: cs, cancel: cancel, server: shown, transport: "sse", opts: opts}, nil
}

// Tools lists every tool the server offers (all pages).
func (c *Conn) Tools(ctx context.Context) ([]Tool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.ConnectTimeout)
	defer cancel()
	var out []Tool
	for t, err := range c.cs.Tools(ctx, nil) {
		if err != nil {
			return nil, fmt.Errorf("MCP server %s: list tools: %w", c.server, connectErr(ctx, err))
		}
		schema, err := json.Marshal(t.InputSchema)
		if err != nil || string(schema) == "null" {
			schema = json.RawMessage(`{"type":"object"}`)
		}
		out = append(out, Tool{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	return out, nil
}

// Call calls one tool. A result the tool marks isError is a Result with
// IsError; err means the call failed at the protocol level (an unknown
// tool, a JSON-RPC error, a timeout, the server gone), and its text is
// meant for the model.
func (c *Conn) Call(ctx context.Context, name string, input json.RawMessage) (*Result, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.CallTimeout)
	defer cancel()
	var args any = map[string]any{}
	if len(input) > 0 && string(input) != "null" {
		args = input
	}
	res, err := c.cs.CallTool(ctx, &sdk.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, fmt.Errorf("MCP server %s: tool %s did not answer within %s", c.server, name, c.opts.CallTimeout)
		}
		return nil, fmt.Errorf("MCP server %s: tool %s: %w", c.server, name, err)
	}
	return &Result{Content: Blocks(res), IsError: res.IsError}, nil
}

// Close ends the session (a DELETE for streamable HTTP, bounded by the
// SDK).
func (c *Conn) Close() error {
	err := c.cs.Close()
	c.cancel(nil)
	return err
}

func connectErr(ctx context.Context, err error) error {
	if errors.Is(context.Cause(ctx), context.DeadlineExceeded) {
		return fmt.Errorf("no answer in time: %w", context.DeadlineExceeded)
	}
	return err
}

// displayURL is the URL as errors and logs show it: no user info, no
// query (either may carry a credential).
func displayURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("MCP server URL must be an http or https URL")
	}
	return u.Scheme + "://" + u.Host + u.Path, nil
}

// authTransport adds the bearer token to every request and records the
// status of the last POST and GET, which decides the SSE fallback and
// tells a refused credential from an old server.
type authTransport struct {
	base     http.RoundTripper
	token    string
	lastPOST atomic.Int32
	lastGET  atomic.Int32
}

func (a *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if a.token != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	resp, err := a.base.RoundTrip(req)
	if err == nil {
		switch req.Method {
		case http.MethodPost:
			a.lastPOST.Store(int32(resp.StatusCode))
		case http.MethodGet:
			a.lastGET.Store(int32(resp.StatusCode))
		}
	}
	return resp, err
}
