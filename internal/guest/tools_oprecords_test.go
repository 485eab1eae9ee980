package guest

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestJournalledToolRunsOnce: a tool call with an op id is recorded by the
// guest; the same op id is refused (never a second run), and GET /ops
// returns the recorded tool result.
func TestJournalledToolRunsOnce(t *testing.T) {
	c, work := startGuest(t, nil)
	defer closeShell(t, c)
	const id = "op_00112233445566778899aabbccddeeff"
	in, _ := json.Marshal(map[string]any{"command": "echo x >> log; wc -l < log"})
	res, err := c.RunTool(context.Background(), "bash", ToolRequest{Input: in, OpID: id})
	if err != nil || res.IsError || strings.TrimSpace(res.Content) != "1" {
		t.Fatalf("first call: %+v %v", res, err)
	}
	_, err = c.RunTool(context.Background(), "bash", ToolRequest{Input: in, OpID: id})
	if !errors.Is(err, ErrOpExists) {
		t.Fatalf("replayed op id: want ErrOpExists, got %v", err)
	}
	if b, _ := os.ReadFile(filepath.Join(work, "log")); string(b) != "x\n" {
		t.Fatalf("log after the replay: %q (the command ran twice)", b)
	}
	st, err := c.Op(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	if st.State != OpStateFinished || st.Result == nil || st.Result.Tool == nil || st.Result.Tool.Content != res.Content {
		t.Fatalf("op status: %+v", st)
	}
	if _, err := c.RunTool(context.Background(), "bash", ToolRequest{Input: in, OpID: "op_bad"}); err == nil {
		t.Fatal("malformed op id accepted")
	}
}

// TestJournalledToolOutlivesItsCaller: the caller goes away mid-call (the
// daemon died); the call runs to its end and recovery reattaches with
// WaitOp and reads the result.
func TestJournalledToolOutlivesItsCaller(t *testing.T) {
	c, work := startGuest(t, nil)
	defer closeShell(t, c)
	const id = "op_ffeeddccbbaa99887766554433221100"
	in, _ := json.Marshal(map[string]any{"command": "touch started; while [ ! -e go ]; do sleep 0.02; done; echo done"})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.RunTool(ctx, "bash", ToolRequest{Input: in, OpID: id})
		errc <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(work, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("cancelled call returned no error")
	}
	st, err := c.Op(context.Background(), id)
	if err != nil || st.State != OpStateRunning {
		t.Fatalf("after the caller left: %+v %v", st, err)
	}
	if err := os.WriteFile(filepath.Join(work, "go"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	st, err = c.WaitOp(context.Background(), id, 10*time.Second)
	if err != nil || st.State != OpStateFinished || st.Result.Tool == nil || strings.TrimSpace(st.Result.Tool.Content) != "done" {
		t.Fatalf("reattached: %+v %v", st, err)
	}
}

// TestJournalledToolCancel: an interrupt stops a journalled call through
// DELETE /tools/ops/{op_id}; the call's (cancelled) result is recorded.
func TestJournalledToolCancel(t *testing.T) {
	c, work := startGuest(t, nil)
	defer closeShell(t, c)
	const id = "op_0123456789abcdef0123456789abcdef"
	in, _ := json.Marshal(map[string]any{"command": "touch started; sleep 30"})
	errc := make(chan error, 1)
	go func() {
		_, err := c.RunTool(context.Background(), "bash", ToolRequest{Input: in, OpID: id})
		errc <- err
	}()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if _, err := os.Stat(filepath.Join(work, "started")); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the command did not start")
		}
	}
	if err := c.CancelTool(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	st, err := c.Op(context.Background(), id)
	if err != nil || st.State != OpStateFinished || !st.Result.Tool.IsError || !strings.Contains(st.Result.Tool.Content, "cancelled") {
		t.Fatalf("after cancel: %+v %v", st, err)
	}
	if err := c.CancelTool(context.Background(), id); !IsNotFound(err) {
		t.Fatalf("cancel of a finished call: %v", err)
	}
}
