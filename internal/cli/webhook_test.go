package cli_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

func TestWebhookCommands(t *testing.T) {
	got := make(chan string, 16)
	rcv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
	}))
	defer rcv.Close()
	d := daemontest.Start(t, func(c *config.Config) { c.Webhooks.AllowLoopback = true })
	run := inProcess(t, d)

	_, stderr := run(1, "webhook", "create", rcv.URL, "--event", "agent.deleted")
	if !strings.Contains(stderr, "agent.deleted not supported yet") {
		t.Fatalf("unsupported type: %s", stderr)
	}
	out, _ := run(0, "webhook", "create", rcv.URL, "--event", "environment.created", "--description", "cli")
	lines := strings.Fields(out)
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "whep_") || !strings.HasPrefix(lines[1], "whsec_") {
		t.Fatalf("create printed %q, want the id and the secret", out)
	}
	id := lines[0]
	if out, _ := run(0, "webhook", "ls"); !strings.Contains(out, id) || !strings.Contains(out, "environment.created") || strings.Contains(out, "whsec_") {
		t.Fatalf("ls: %s", out)
	}
	run(0, "env", "create", "--name", "hooked")
	if body := receive(t, got); !strings.Contains(body, `"environment.created"`) {
		t.Fatalf("delivered %s", body)
	}
	// The attempt is recorded just after the receiver answered.
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(20 * time.Millisecond) {
		out, _ = run(0, "webhook", "deliveries", id, "--status", "delivered")
		if strings.Contains(out, "environment.created") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("deliveries: %s", out)
		}
	}
	did := strings.Fields(strings.Split(strings.TrimSpace(out), "\n")[1])[1]
	run(0, "webhook", "redeliver", id, did)
	if body := receive(t, got); !strings.Contains(body, `"environment.created"`) {
		t.Fatalf("redelivered %s", body)
	}
	run(0, "webhook", "rm", id)
	if out, _ := run(0, "webhook", "ls"); strings.Contains(out, id) {
		t.Fatalf("ls after rm: %s", out)
	}
}

func receive(t *testing.T, got <-chan string) string {
	t.Helper()
	select {
	case b := <-got:
		return b
	case <-time.After(time.Minute):
		t.Fatal("no webhook arrived")
		return ""
	}
}
