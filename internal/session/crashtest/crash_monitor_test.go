package crashtest

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/monitor"
)

// get reads a JSON answer with the node's key.
func (n *node) get(path string) (int, map[string]any) {
	n.t.Helper()
	req, _ := http.NewRequest("GET", n.url()+path, nil)
	req.Header.Set("x-api-key", n.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		n.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	_ = json.Unmarshal(b, &m)
	return resp.StatusCode, m
}

// TestTerminationResumesAfterACrash: the monitor claims the termination of
// a dead agent's sandbox and the daemon dies before the sequence runs
// (transcript, stop, task, audit). The termination is claimed, so no check
// would take it again; the restarted daemon resumes it: the task fails with
// the claimed reason, the sandbox is stopped, and it is audited once.
func TestTerminationResumesAfterACrash(t *testing.T) {
	n := newNode(t, "sqlite", "http://127.0.0.1:1")
	conf, err := os.OpenFile(filepath.Join(n.home, "agentkernel.toml"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf.WriteString("\n[monitor]\nheartbeat_timeout = \"2s\"\ncheck_interval = \"200ms\"\n")
	conf.Close()
	n.start()
	code, tk, err := n.post("/v1/tickets", `{"title":"crash"}`)
	if err != nil || code >= 300 {
		t.Fatalf("ticket: %d %v %v", code, tk, err)
	}
	n.arm(monitor.FailAfterTerminationClaim)
	code, task, err := n.post("/v1/tasks", `{"ticket_id":"`+tk["id"].(string)+`","command":["/bin/sh","-c","echo working; sleep 600"]}`)
	if err != nil || code >= 300 {
		t.Fatalf("task: %d %v %v", code, task, err)
	}
	id := task["id"].(string)
	// The agent never sends a heartbeat: dead after 2 s, its termination
	// claimed, and the daemon hangs right there.
	n.waitReached(monitor.FailAfterTerminationClaim)
	n.kill()
	n.disarm(monitor.FailAfterTerminationClaim)
	if active := count(t, filepath.Join(n.home, "state.db"), `SELECT COUNT(*) FROM agent_tasks WHERE id = ? AND status IN
		('claiming', 'assigned', 'running')`, id); active != 1 {
		t.Fatal("the task left its active state before the sequence ran")
	}
	if unfinished := count(t, filepath.Join(n.home, "state.db"), `SELECT COUNT(*) FROM terminations WHERE finished_at IS NULL`); unfinished != 1 {
		t.Fatalf("%d unfinished terminations after the kill, want the claimed one", unfinished)
	}
	n.start()

	deadline := time.Now().Add(60 * time.Second)
	var got map[string]any
	for {
		_, got = n.get("/v1/tasks/" + id)
		if got["status"] == "failed" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the claimed termination was never carried out: task %v\n%s", got, n.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got["failure_reason"] != "heartbeat_timeout" {
		t.Fatalf("task after the resumed termination: %v", got)
	}
	sbx, _ := got["sandbox_id"].(string)
	_, sb := n.get("/v1/sandboxes/" + sbx)
	if sb["state"] != "cold" {
		t.Fatalf("sandbox after the resumed termination: %v", sb)
	}
	// Audited once, with the transcript the resumed sequence saved.
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, audit := n.get("/v1/audit?kind=" + monitor.AuditTerminated)
		recs, _ := audit["data"].([]any)
		if len(recs) == 1 {
			data, _ := json.Marshal(recs[0])
			if !strings.Contains(string(data), sbx) || !strings.Contains(string(data), `trn_`) {
				t.Fatalf("audit %s: want the sandbox and its transcript", data)
			}
			break
		}
		if len(recs) > 1 || time.Now().After(deadline) {
			t.Fatalf("audit records: %v", audit)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
