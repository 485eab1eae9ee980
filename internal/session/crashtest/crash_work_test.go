package crashtest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestDaemonKilledWhileAWorkerServesASession: a self_hosted session's
// first bash call ran on the SDK's environment worker and its result is
// in; the daemon is killed -9 in the model call that follows. The worker
// rides out the outage (its heartbeats fail, its lease holds); the
// restarted daemon resumes the turn, the worker runs the second call, and
// each command ran exactly once, under the one work item.
func TestDaemonKilledWhileAWorkerServesASession(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		var once sync.Once
		inStep := make(chan struct{})
		release := make(chan struct{})
		fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
			switch r.AssistantTurns() {
			case 0:
				return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo one >> log.txt"}}}}
			case 1:
				once.Do(func() { close(inStep) })
				<-release // the daemon is killed while it waits here
				return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo two >> log.txt"}}}}
			}
			return anthropictest.Turn{Text: "both ran"}
		})
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		ctx := context.Background()
		agent, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
			Name: "remote", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
			Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
				Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}},
		})
		if err != nil {
			t.Fatal(err)
		}
		env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "workers",
			Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
		if err != nil {
			t.Fatal(err)
		}
		key := environmentKey(t, n, env.ID)
		s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
			Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agent.ID)}, EnvironmentID: env.ID})
		if err != nil {
			t.Fatal(err)
		}

		workdir := t.TempDir()
		var logs lockedBuffer
		logs.b = &bytes.Buffer{}
		wctx, stopWorker := context.WithCancel(ctx)
		done := make(chan error, 1)
		idle := 30 * time.Second
		go func() {
			done <- environments.NewEnvironmentWorker(anthropic.NewClient(option.WithBaseURL(n.url())),
				environments.EnvironmentWorkerOptions{EnvironmentID: env.ID, EnvironmentKey: key, Workdir: workdir, MaxIdle: &idle,
					Logger: slog.New(slog.NewTextHandler(&logs, nil))}).Run(wctx)
		}()
		defer func() { stopWorker(); <-done }()

		send(t, c, s.ID, "twice")
		select {
		case <-inStep:
		case <-time.After(60 * time.Second):
			t.Fatalf("the first call's result never reached the model\n%s\n%s", logs.String(), n.logs())
		}
		if b, _ := os.ReadFile(filepath.Join(workdir, "log.txt")); string(b) != "one\n" {
			t.Fatalf("before the kill the worker ran %q", b)
		}
		n.kill()
		close(release)
		n.start()
		c = n.client()
		evs := waitIdle(t, n, c, s.ID, 3) // requires_action twice, then end_turn
		if last := evs[len(evs)-1]; last.Type != "session.status_idle" || !strings.Contains(last.Raw, `"end_turn"`) {
			t.Fatalf("the turn did not end: %v\n%s", types(evs), logs.String())
		}
		if b, _ := os.ReadFile(filepath.Join(workdir, "log.txt")); string(b) != "one\ntwo\n" {
			t.Fatalf("the commands ran %q, want each once\n%s", b, logs.String())
		}
		if got := len(ofType(evs, "user.tool_result")); got != 2 {
			t.Fatalf("%d tool results, want 2: %v", got, types(evs))
		}
		page, err := c.Beta.Environments.Work.List(ctx, env.ID, anthropic.BetaEnvironmentWorkListParams{})
		if err != nil || len(page.Data) != 1 || page.Data[0].State != "active" {
			t.Fatalf("work after the crash: %v %v", page, err)
		}
	})
}

// environmentKey makes a key of the environment (POST /v1/keys).
func environmentKey(t *testing.T, n *node, envID string) string {
	t.Helper()
	req, _ := http.NewRequest("POST", n.url()+"/v1/keys", strings.NewReader(fmt.Sprintf(`{"name":"worker","environment_id":%q}`, envID)))
	req.Header.Set("x-api-key", n.key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var k struct {
		Secret string `json:"secret"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&k); err != nil || resp.StatusCode != 201 || k.Secret == "" {
		t.Fatalf("environment key: %d %v", resp.StatusCode, err)
	}
	return k.Secret
}
