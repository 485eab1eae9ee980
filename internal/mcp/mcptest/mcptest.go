// Package mcptest runs a real MCP server for tests, built with the official
// Go MCP SDK on 127.0.0.1: one tool, "echo", behind a bearer token, over
// streamable HTTP or the older HTTP+SSE transport. Its input says how it
// behaves, so one server serves every case: {"text": "fail"} answers with an
// isError result, {"text": "hang"} holds the call until the caller gives up
// or the test releases it, anything else is echoed back.
package mcptest

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Options configure a Server.
type Options struct {
	// Token, when set, is the bearer every request must carry (else 401).
	Token string
	// SSE serves the 2024-11-05 HTTP+SSE transport instead of streamable
	// HTTP.
	SSE bool
}

// Server is a running test MCP server.
type Server struct {
	URL string
	// Calls counts tools/call requests that reached the tool.
	Calls atomic.Int64
	// Arrived receives one value per call that reached the tool, before it
	// answers (buffered; a full buffer drops the signal).
	Arrived chan string

	mu      sync.Mutex
	auths   []string
	release chan struct{}
	once    sync.Once
	srv     *httptest.Server
}

// EchoInput is the echo tool's input.
type EchoInput struct {
	Text string `json:"text" jsonschema:"the text to echo"`
}

// New starts a server; it stops at test cleanup (hanging calls released
// first).
func New(t testing.TB, opts Options) *Server {
	s := &Server{Arrived: make(chan string, 64), release: make(chan struct{})}
	server := mcp.NewServer(&mcp.Implementation{Name: "mcptest", Version: "v1"}, nil)
	mcp.AddTool(server, &mcp.Tool{Name: "echo", Description: "Echo the text back."}, s.echo)
	var h http.Handler
	if opts.SSE {
		h = mcp.NewSSEHandler(func(*http.Request) *mcp.Server { return server }, nil)
	} else {
		h = mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return server }, &mcp.StreamableHTTPOptions{Stateless: true})
	}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		s.mu.Lock()
		s.auths = append(s.auths, got)
		s.mu.Unlock()
		if opts.Token != "" && got != "Bearer "+opts.Token {
			http.Error(w, "invalid bearer token", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}))
	s.URL = s.srv.URL
	t.Cleanup(s.Close)
	return s
}

func (s *Server) echo(ctx context.Context, _ *mcp.CallToolRequest, in EchoInput) (*mcp.CallToolResult, any, error) {
	s.Calls.Add(1)
	select {
	case s.Arrived <- in.Text:
	default:
	}
	switch in.Text {
	case "fail":
		return &mcp.CallToolResult{IsError: true, Content: []mcp.Content{&mcp.TextContent{Text: "echo failed on purpose"}}}, nil, nil
	case "hang":
		select {
		case <-ctx.Done():
		case <-s.release:
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "released"}}}, nil, nil
	}
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: "echo: " + in.Text}}}, nil, nil
}

// Authorizations returns the Authorization header of every request so far.
func (s *Server) Authorizations() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.auths...)
}

// Release lets hanging calls answer.
func (s *Server) Release() { s.once.Do(func() { close(s.release) }) }

// Close releases hanging calls and stops the server.
func (s *Server) Close() {
	s.Release()
	s.srv.CloseClientConnections()
	s.srv.Close()
}
