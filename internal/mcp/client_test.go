package mcp_test

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/mcp"
	"github.com/agentkernel/agentkernel/internal/mcp/mcptest"
)

const token = "tok-secret-4711"

func TestCallOverBothTransportsWithTheBearer(t *testing.T) {
	for _, c := range []struct {
		name, transport string
		sse             bool
	}{{"streamable", "streamable_http", false}, {"sse fallback", "sse", true}} {
		t.Run(c.name, func(t *testing.T) {
			srv := mcptest.New(t, mcptest.Options{Token: token, SSE: c.sse})
			ctx := context.Background()
			conn, err := mcp.Connect(ctx, srv.URL, mcp.Options{Token: token})
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if conn.Transport() != c.transport {
				t.Fatalf("transport %s, want %s", conn.Transport(), c.transport)
			}
			tools, err := conn.Tools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if len(tools) != 1 || tools[0].Name != "echo" || !strings.Contains(string(tools[0].InputSchema), `"text"`) {
				t.Fatalf("tools %+v", tools)
			}
			res, err := conn.Call(ctx, "echo", json.RawMessage(`{"text":"hi"}`))
			if err != nil {
				t.Fatal(err)
			}
			if res.IsError || len(res.Content) != 1 || res.Content[0]["text"] != "echo: hi" || res.Content[0]["type"] != "text" {
				t.Fatalf("result %+v", res)
			}
			for _, a := range srv.Authorizations() {
				if a != "Bearer "+token {
					t.Fatalf("a request carried %q", a)
				}
			}
		})
	}
}

func TestWrongTokenIsUnauthorizedAndNeverShown(t *testing.T) {
	for _, sse := range []bool{false, true} {
		srv := mcptest.New(t, mcptest.Options{Token: token, SSE: sse})
		_, err := mcp.Connect(context.Background(), srv.URL+"?key=q-secret", mcp.Options{Token: "wrong-secret-0815"})
		if !errors.Is(err, mcp.ErrUnauthorized) {
			t.Fatalf("sse=%v: %v, want ErrUnauthorized", sse, err)
		}
		if strings.Contains(err.Error(), "wrong-secret-0815") || strings.Contains(err.Error(), "q-secret") {
			t.Fatalf("the error shows a secret: %v", err)
		}
	}
}

func TestToolErrorsAndTimeouts(t *testing.T) {
	srv := mcptest.New(t, mcptest.Options{Token: token})
	ctx := context.Background()
	conn, err := mcp.Connect(ctx, srv.URL, mcp.Options{Token: token, CallTimeout: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	res, err := conn.Call(ctx, "echo", json.RawMessage(`{"text":"fail"}`))
	if err != nil || !res.IsError || res.Content[0]["text"] != "echo failed on purpose" {
		t.Fatalf("isError result: %+v %v", res, err)
	}
	if _, err := conn.Call(ctx, "nope", nil); err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("unknown tool: %v", err)
	}
	_, err = conn.Call(ctx, "echo", json.RawMessage(`{"text":"hang"}`))
	if err == nil || !strings.Contains(err.Error(), "did not answer within") {
		t.Fatalf("hanging call: %v", err)
	}
	// The caller's context ends a call too (an interrupt).
	cctx, cancel := context.WithCancel(ctx)
	go func() { <-srv.Arrived; <-srv.Arrived; cancel() }()
	conn2, err := mcp.Connect(ctx, srv.URL, mcp.Options{Token: token})
	if err != nil {
		t.Fatal(err)
	}
	defer conn2.Close()
	if _, err := conn2.Call(cctx, "echo", json.RawMessage(`{"text":"hang"}`)); err == nil {
		t.Fatal("a cancelled call returned no error")
	}
}

func TestServerDownOrSilent(t *testing.T) {
	// Down: nothing listens.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if _, err := mcp.Connect(context.Background(), "http://"+addr+"/mcp", mcp.Options{}); err == nil {
		t.Fatal("connected to nothing")
	}
	// Silent: accepts and never answers.
	ln, err = net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	_, err = mcp.Connect(context.Background(), "http://"+ln.Addr().String()+"/mcp", mcp.Options{ConnectTimeout: 200 * time.Millisecond})
	if err == nil || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("silent server: %v", err)
	}
	if _, err := mcp.Connect(context.Background(), "ftp://x/y", mcp.Options{}); err == nil {
		t.Fatal("ftp URL accepted")
	}
}
