package agentkernel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/lib/environments"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel/internal/auth"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/envworker"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// selfHosted is a daemon with a self_hosted environment, an agent with the
// agent toolset on the fake model, and an environment key.
type selfHosted struct {
	d      *daemontest.Daemon
	c      anthropic.Client // admin
	agent  *anthropic.BetaManagedAgentsAgent
	env    *anthropic.BetaEnvironment
	envKey string
}

func newSelfHosted(t testing.TB, play func(anthropictest.Request) anthropictest.Turn, mod ...daemontest.Option) *selfHosted {
	t.Helper()
	fake := anthropictest.New(t, play)
	d := daemontest.Start(t, append([]daemontest.Option{func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	}}, mod...)...)
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)
	a, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "remote", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401,
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{
		Name:   "workers",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if env.Config.Type != "self_hosted" {
		t.Fatalf("environment config %s", env.Config.RawJSON())
	}
	return &selfHosted{d: d, c: c, agent: a, env: env, envKey: envKey(t, d, d.AdminKey, env.ID)}
}

// envKey makes an environment key with POST /v1/keys.
func envKey(t testing.TB, d *daemontest.Daemon, key, envID string) string {
	t.Helper()
	code, body := rawCall(t, d, key, http.MethodPost, "/v1/keys", fmt.Sprintf(`{"name":"worker","environment_id":%q}`, envID))
	if code != http.StatusCreated {
		t.Fatalf("create environment key: %d %s", code, body)
	}
	var k struct {
		Secret        string `json:"secret"`
		EnvironmentID string `json:"environment_id"`
	}
	if err := json.Unmarshal(body, &k); err != nil || k.Secret == "" || k.EnvironmentID != envID {
		t.Fatalf("environment key %s", body)
	}
	return k.Secret
}

// rawCall sends one request with key as the bearer.
func rawCall(t testing.TB, d *daemontest.Daemon, key, method, path, body string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, d.URL+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+key)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// sdkWorker is the SDK's unmodified environment worker, as a user runs it.
func sdkWorker(h *selfHosted, workdir string, log io.Writer) *environments.EnvironmentWorker {
	idle := 30 * time.Second
	return environments.NewEnvironmentWorker(anthropic.NewClient(option.WithBaseURL(h.d.URL), option.WithMaxRetries(2)),
		environments.EnvironmentWorkerOptions{
			EnvironmentID: h.env.ID, EnvironmentKey: h.envKey, Workdir: workdir, MaxIdle: &idle,
			Logger: slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
}

// waitEndTurn follows the session's events until an idle that is not
// requires_action, and returns them all.
func waitEndTurn(t *testing.T, c anthropic.Client, sessionID string, within time.Duration, logs ...func() string) []anthropic.BetaManagedAgentsSessionEventUnion {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		var evs []anthropic.BetaManagedAgentsSessionEventUnion
		pager := c.Beta.Sessions.Events.ListAutoPaging(context.Background(), sessionID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
		for pager.Next() {
			evs = append(evs, pager.Current())
		}
		if err := pager.Err(); err != nil {
			t.Fatal(err)
		}
		if n := len(evs); n > 0 && evs[n-1].Type == "session.status_idle" && evs[n-1].StopReason.Type == "end_turn" {
			return evs
		}
		for _, ev := range evs {
			if ev.Type == "session.error" {
				t.Fatalf("session.error %s", ev.RawJSON())
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	var types []string
	pager := c.Beta.Sessions.Events.ListAutoPaging(context.Background(), sessionID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	for pager.Next() {
		types = append(types, pager.Current().Type)
	}
	var more string
	for _, l := range logs {
		more += "\n" + l()
	}
	t.Fatalf("session %s did not end its turn within %v: %v%s", sessionID, within, types, more)
	return nil
}

func eventsOf(evs []anthropic.BetaManagedAgentsSessionEventUnion, typ string) []anthropic.BetaManagedAgentsSessionEventUnion {
	var out []anthropic.BetaManagedAgentsSessionEventUnion
	for _, ev := range evs {
		if ev.Type == typ {
			out = append(out, ev)
		}
	}
	return out
}

// TestSelfHostedSessionRunsOnTheSDKWorker: a session of a self_hosted
// environment queues work; the SDK's own environment worker, with an
// environment key, polls it, acks it, heartbeats, runs the model's bash
// call in its directory on its host, and posts user.tool_result; the
// model gets the result and the turn ends. Nothing ran in a daemon
// sandbox.
func TestSelfHostedSessionRunsOnTheSDKWorker(t *testing.T) {
	h := newSelfHosted(t, func(r anthropictest.Request) anthropictest.Turn {
		for _, b := range r.Blocks(len(r.Messages) - 1) {
			if b.Type == "tool_result" {
				return anthropictest.Turn{Text: "the worker said " + strings.TrimSpace(b.ToolResultText())}
			}
		}
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo remote > made-here.txt; cat made-here.txt; pwd"}}}}
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s := newSession(t, h.c, h.agent.ID, h.env.ID)

	// The session's work is queued at creation.
	stats, err := h.c.Beta.Environments.Work.Stats(ctx, h.env.ID, anthropic.BetaEnvironmentWorkStatsParams{})
	if err != nil {
		t.Fatal(err)
	}
	if stats.Depth != 1 || stats.Pending != 0 || stats.OldestQueuedAt == "" {
		t.Fatalf("stats before any worker %s", stats.RawJSON())
	}

	workdir := t.TempDir()
	var logs lockedBuffer
	done := make(chan error, 1)
	go func() { done <- sdkWorker(h, workdir, &logs).Run(ctx) }()

	if _, err := h.c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("run it remotely")}}); err != nil {
		t.Fatal(err)
	}
	evs := waitEndTurn(t, h.c, s.ID, 60*time.Second, logs.String)
	uses, results := eventsOf(evs, "agent.tool_use"), eventsOf(evs, "user.tool_result")
	if len(uses) != 1 || len(results) != 1 || results[0].ToolUseID != uses[0].ID {
		t.Fatalf("tool use and result %v / %v\n%s", uses, results, logs.String())
	}
	if len(eventsOf(evs, "agent.tool_result")) != 0 {
		t.Fatal("the daemon ran the tool itself")
	}
	// The worker's answer sent again, as the SDK's tool runner or its HTTP
	// client resend one whose answer was lost or late: the stored event is
	// the answer, and the log holds one result. Another answer of the same
	// call is refused.
	var sent struct {
		Content json.RawMessage `json:"content"`
		IsError bool            `json:"is_error"`
	}
	if err := json.Unmarshal([]byte(results[0].RawJSON()), &sent); err != nil {
		t.Fatal(err)
	}
	again := fmt.Sprintf(`{"events":[{"type":"user.tool_result","tool_use_id":%q,"content":%s,"is_error":%v}]}`, uses[0].ID, sent.Content, sent.IsError)
	code, body := rawCall(t, h.d, h.d.AdminKey, "POST", "/v1/sessions/"+s.ID+"/events", again)
	if code != 200 || !strings.Contains(string(body), `"id":"`+results[0].ID+`"`) {
		t.Fatalf("the answer resent: %d %s; want the stored event %s", code, body, results[0].ID)
	}
	other := fmt.Sprintf(`{"events":[{"type":"user.tool_result","tool_use_id":%q,"content":[{"type":"text","text":"something else"}]}]}`, uses[0].ID)
	if code, body := rawCall(t, h.d, h.d.AdminKey, "POST", "/v1/sessions/"+s.ID+"/events", other); code != 400 || !strings.Contains(string(body), results[0].ID) {
		t.Fatalf("another answer of an answered call: %d %s; want a 400 naming the answer", code, body)
	}
	if n := countEvents(h.c, s.ID, "user.tool_result"); n != 1 {
		t.Fatalf("%d tool results after the resend, want 1", n)
	}
	if b, err := os.ReadFile(filepath.Join(workdir, "made-here.txt")); err != nil || string(b) != "remote\n" {
		t.Fatalf("the worker's directory: %q, %v", b, err)
	}
	msgs := eventsOf(evs, "agent.message")
	if len(msgs) != 1 || !strings.Contains(msgs[0].RawJSON(), "the worker said remote") || !strings.Contains(msgs[0].RawJSON(), workdir) {
		t.Fatalf("the model did not get the worker's result: %v", msgs)
	}
	idles := eventsOf(evs, "session.status_idle")
	if len(idles) != 2 || idles[0].StopReason.Type != "requires_action" || len(idles[0].StopReason.EventIDs) != 1 || idles[0].StopReason.EventIDs[0] != uses[0].ID {
		t.Fatalf("the turn did not wait for the worker: %v", idles)
	}

	// The work item as the SDK reads it: acked, heartbeating, the session's.
	page, err := h.c.Beta.Environments.Work.List(ctx, h.env.ID, anthropic.BetaEnvironmentWorkListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 {
		t.Fatalf("work items %s", page.RawJSON())
	}
	w := page.Data[0]
	if w.Data.ID != s.ID || w.Data.Type != "session" || w.State != "active" || w.AcknowledgedAt == "" || w.LatestHeartbeatAt == "" || w.EnvironmentID != h.env.ID {
		t.Fatalf("work item %s", w.RawJSON())
	}
	got, err := h.c.Beta.Environments.Work.Get(ctx, w.ID, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: h.env.ID})
	if err != nil || got.ID != w.ID || got.Secret != "" {
		t.Fatalf("get %v %v", got, err)
	}
	// Metadata patch: set, then delete with null.
	up, err := h.c.Beta.Environments.Work.Update(ctx, w.ID, anthropic.BetaEnvironmentWorkUpdateParams{EnvironmentID: h.env.ID,
		BetaSelfHostedWorkUpdateRequest: anthropic.BetaSelfHostedWorkUpdateRequestParam{Metadata: map[string]string{"host": "rack-1"}}})
	if err != nil || up.Metadata["host"] != "rack-1" {
		t.Fatalf("update %v %v", up, err)
	}
	code, body = rawCall(t, h.d, h.d.AdminKey, http.MethodPost, "/v1/environments/"+h.env.ID+"/work/"+w.ID, `{"metadata":{"host":null}}`)
	if code != http.StatusOK || bytes.Contains(body, []byte("rack-1")) {
		t.Fatalf("delete metadata key: %d %s", code, body)
	}

	// Deleting the session stops its work; the worker lets it go.
	if _, err := h.c.Beta.Sessions.Delete(ctx, s.ID, anthropic.BetaSessionDeleteParams{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, 20*time.Second, func() bool {
		got, err := h.c.Beta.Environments.Work.Get(ctx, w.ID, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: h.env.ID})
		return err == nil && got.State == "stopped" && got.StoppedAt != ""
	}, "the deleted session's work stops")
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("worker: %v\n%s", err, logs.String())
	}
}

func waitUntil(t *testing.T, within time.Duration, ok func() bool, what string) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestEnvironmentKeyIsScoped: an environment key reaches its environment's
// queue and its sessions' events, sends tool results only, and nothing
// else; a tenant key of another tenant sees none of it.
func TestEnvironmentKeyIsScoped(t *testing.T) {
	h := newSelfHosted(t, anthropictest.Script(anthropictest.Turn{Text: "hi"}))
	ctx := context.Background()
	s := newSession(t, h.c, h.agent.ID, h.env.ID)
	cloud := newEnv(t, h.c, "cloud")
	other := newSession(t, h.c, h.agent.ID, cloud.ID)
	other2, err := h.c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "w2",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfSelfHosted: &anthropic.BetaSelfHostedConfigParams{}}})
	if err != nil {
		t.Fatal(err)
	}
	k := h.envKey
	for _, c := range []struct {
		method, path, body string
		want               int
	}{
		{"GET", "/v1/sessions/" + s.ID, "", 200},
		{"GET", "/v1/sessions/" + s.ID + "/events", "", 200},
		{"GET", "/v1/environments/" + h.env.ID + "/work/stats", "", 200},
		{"GET", "/v1/environments/" + h.env.ID + "/work/poll", "", 200},
		// Not its environment's.
		{"GET", "/v1/sessions/" + other.ID, "", 404},
		{"GET", "/v1/sessions/" + other.ID + "/events", "", 404},
		{"GET", "/v1/environments/" + other2.ID + "/work/stats", "", 404},
		// Not a worker's business.
		{"GET", "/v1/agents", "", 403},
		{"GET", "/v1/sessions", "", 403},
		{"POST", "/v1/keys", `{"name":"x","environment_id":"` + h.env.ID + `"}`, 403},
		{"DELETE", "/v1/sessions/" + s.ID, "", 403},
		{"POST", "/v1/sessions/" + s.ID + "/events", `{"events":[{"type":"user.message","content":[{"type":"text","text":"hi"}]}]}`, 403},
		// A tool result naming no call of the session.
		{"POST", "/v1/sessions/" + s.ID + "/events", `{"events":[{"type":"user.tool_result","tool_use_id":"sevt_nope","content":[{"type":"text","text":"x"}]}]}`, 400},
	} {
		if code, body := rawCall(t, h.d, k, c.method, c.path, c.body); code != c.want {
			t.Errorf("%s %s: %d %s, want %d", c.method, c.path, code, body, c.want)
		}
	}
	// Bad input names the field or the limit.
	for _, c := range []struct{ path, mention string }{
		{"/v1/environments/" + h.env.ID + "/work/poll?block_ms=0", "block_ms"},
		{"/v1/environments/" + h.env.ID + "/work/poll?block_ms=5000", "block_ms"},
		{"/v1/environments/" + h.env.ID + "/work/poll?reclaim_older_than_ms=x", "reclaim_older_than_ms"},
	} {
		if code, body := rawCall(t, h.d, k, "GET", c.path, ""); code != 400 || !bytes.Contains(body, []byte(c.mention)) {
			t.Errorf("%s: %d %s", c.path, code, body)
		}
	}
	// A cloud environment has no queue and no environment keys; a
	// self_hosted one takes no cloud settings, and a type is fixed.
	if code, body := rawCall(t, h.d, h.d.AdminKey, "GET", "/v1/environments/"+cloud.ID+"/work/stats", ""); code != 400 || !bytes.Contains(body, []byte("self_hosted")) {
		t.Errorf("cloud queue: %d %s", code, body)
	}
	if code, body := rawCall(t, h.d, h.d.AdminKey, "POST", "/v1/keys", `{"name":"x","environment_id":"`+cloud.ID+`"}`); code != 422 || !bytes.Contains(body, []byte("environment_id")) {
		t.Errorf("key for a cloud environment: %d %s", code, body)
	}
	for _, c := range []struct{ path, body, mention string }{
		{"/v1/environments", `{"name":"x","config":{"type":"self_hosted","networking":{"type":"unrestricted"}}}`, "config.networking"},
		{"/v1/environments", `{"name":"x","config":{"type":"self_hosted"},"metadata":{"agentkernel.image":"alpine"}}`, "agentkernel.image"},
		{"/v1/environments/" + h.env.ID, `{"config":{"type":"cloud"}}`, "fixed"},
		{"/v1/sessions", `{"agent":"` + h.agent.ID + `","environment_id":"` + h.env.ID + `","vault_ids":["vlt_x"]}`, "vault_ids"},
	} {
		if code, body := rawCall(t, h.d, h.d.AdminKey, "POST", c.path, c.body); code != 400 || !bytes.Contains(body, []byte(c.mention)) {
			t.Errorf("POST %s %s: %d %s", c.path, c.body, code, body)
		}
	}
	// A cloud session refuses tool results: its daemon runs its tools.
	if code, body := rawCall(t, h.d, h.d.AdminKey, "POST", "/v1/sessions/"+other.ID+"/events",
		`{"events":[{"type":"user.tool_result","tool_use_id":"sevt_x","content":[]}]}`); code != 400 || !bytes.Contains(body, []byte("self_hosted")) {
		t.Errorf("tool result for a cloud session: %d %s", code, body)
	}
	// Another tenant's key sees nothing of the environment.
	tk := tenantKey(t, h.d, "stranger")
	if code, body := rawCall(t, h.d, tk, "GET", "/v1/environments/"+h.env.ID+"/work/stats", ""); code != 404 {
		t.Errorf("another tenant's stats: %d %s", code, body)
	}
	// A revoked environment key is refused.
	var keys struct {
		Data []struct {
			ID            string  `json:"id"`
			EnvironmentID *string `json:"environment_id"`
		} `json:"data"`
	}
	_, body := rawCall(t, h.d, h.d.AdminKey, "GET", "/v1/keys", "")
	if err := json.Unmarshal(body, &keys); err != nil {
		t.Fatal(err)
	}
	for _, kk := range keys.Data {
		if kk.EnvironmentID != nil && *kk.EnvironmentID == h.env.ID {
			if code, body := rawCall(t, h.d, h.d.AdminKey, "DELETE", "/v1/keys/"+kk.ID, ""); code != 200 {
				t.Fatalf("revoke: %d %s", code, body)
			}
		}
	}
	if code, _ := rawCall(t, h.d, k, "GET", "/v1/environments/"+h.env.ID+"/work/stats", ""); code != 401 {
		t.Errorf("revoked environment key: %d", code)
	}
}

// TestWorkerKilledMidItemContinuesTheLease: the SDK worker (a process of
// its own) runs the first of two bash calls and is killed -9 while it
// holds the session's work. A new worker process continues its lease (the
// SDK's hand-off: the last heartbeat's token) and serves the second call:
// every command ran exactly once.
func TestWorkerKilledMidItemContinuesTheLease(t *testing.T) {
	release := make(chan struct{})
	h := newSelfHosted(t, func(r anthropictest.Request) anthropictest.Turn {
		switch r.AssistantTurns() {
		case 0:
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo one >> log.txt"}}}}
		case 1:
			<-release // the worker is killed while this waits
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo two >> log.txt"}}}}
		}
		return anthropictest.Turn{Text: "both ran"}
	}, func(c *config.Config) { c.WorkQueue.LeaseTTL = config.Duration(60 * time.Second) })
	ctx := context.Background()
	s := newSession(t, h.c, h.agent.ID, h.env.ID)
	workdir := t.TempDir()

	first := startWorkerProcess(t, h, workdir, nil)
	if _, err := h.c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("twice")}}); err != nil {
		t.Fatal(err)
	}
	// The first call's result is in: the worker holds the work, idle.
	waitUntil(t, 60*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(workdir, "log.txt"))
		return string(b) == "one\n" && countEvents(h.c, s.ID, "user.tool_result") == 1
	}, "the first call ran and its result was posted")
	page, err := h.c.Beta.Environments.Work.List(ctx, h.env.ID, anthropic.BetaEnvironmentWorkListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].State != "active" {
		t.Fatalf("work %v %v", page, err)
	}
	item := page.Data[0]
	first.kill()

	// The hand-off: the new process continues the lease from its token.
	cur, err := h.c.Beta.Environments.Work.Get(ctx, item.ID, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: h.env.ID})
	if err != nil {
		t.Fatal(err)
	}
	second := startWorkerProcess(t, h, workdir, map[string]string{
		"ANTHROPIC_WORK_ID": item.ID, "ANTHROPIC_SESSION_ID": s.ID, "ANTHROPIC_WORK_LAST_HEARTBEAT": cur.LatestHeartbeatAt,
	})
	close(release)
	evs := waitEndTurn(t, h.c, s.ID, 60*time.Second, first.logs, second.logs)
	if b, _ := os.ReadFile(filepath.Join(workdir, "log.txt")); string(b) != "one\ntwo\n" {
		t.Fatalf("commands ran %q, want each once\n%s", b, second.logs())
	}
	if n := len(eventsOf(evs, "user.tool_result")); n != 2 {
		t.Fatalf("%d tool results, want 2", n)
	}
	// The lease was continued, not taken over: still the one item.
	page, err = h.c.Beta.Environments.Work.List(ctx, h.env.ID, anthropic.BetaEnvironmentWorkListParams{})
	if err != nil || len(page.Data) != 1 || page.Data[0].ID != item.ID {
		t.Fatalf("work after the hand-off %v %v", page, err)
	}
	second.kill()
}

func countEvents(c anthropic.Client, sessionID, typ string) int {
	n := 0
	pager := c.Beta.Sessions.Events.ListAutoPaging(context.Background(), sessionID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	for pager.Next() {
		if pager.Current().Type == typ {
			n++
		}
	}
	return n
}

type workerProc struct {
	t   *testing.T
	cmd *exec.Cmd
	out *lockedBuffer
}

func (p *workerProc) logs() string { return p.out.String() }

func (p *workerProc) kill() {
	if p.cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL) // the worker and the commands it runs
	_ = p.cmd.Wait()
}

// startWorkerProcess runs the SDK worker in a process of its own (this
// test binary, in TestSDKWorkerProcess). With ANTHROPIC_WORK_ID set it
// serves that one item (HandleItem), else it polls (Run).
func startWorkerProcess(t *testing.T, h *selfHosted, workdir string, env map[string]string) *workerProc {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestSDKWorkerProcess$", "-test.v")
	cmd.Env = append(os.Environ(), "AK_SDK_WORKER=1", "AK_URL="+h.d.URL, "ANTHROPIC_ENVIRONMENT_ID="+h.env.ID,
		"ANTHROPIC_ENVIRONMENT_KEY="+h.envKey, "AK_WORKDIR="+workdir)
	for k, v := range env {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	p := &workerProc{t: t, cmd: cmd, out: &lockedBuffer{}}
	cmd.Stdout, cmd.Stderr = p.out, p.out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.kill)
	return p
}

// TestSDKWorkerProcess is the worker process of startWorkerProcess.
func TestSDKWorkerProcess(t *testing.T) {
	if os.Getenv("AK_SDK_WORKER") != "1" {
		t.Skip("the worker process of TestWorkerKilledMidItemContinuesTheLease")
	}
	idle := 30 * time.Second
	w := environments.NewEnvironmentWorker(anthropic.NewClient(option.WithBaseURL(os.Getenv("AK_URL")), option.WithMaxRetries(2)),
		environments.EnvironmentWorkerOptions{
			EnvironmentID: os.Getenv("ANTHROPIC_ENVIRONMENT_ID"), EnvironmentKey: os.Getenv("ANTHROPIC_ENVIRONMENT_KEY"),
			Workdir: os.Getenv("AK_WORKDIR"), MaxIdle: &idle,
			Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})),
		})
	var err error
	if os.Getenv("ANTHROPIC_WORK_ID") != "" {
		err = w.HandleItem(context.Background(), environments.HandleItemOptions{})
	} else {
		err = w.Run(context.Background())
	}
	if err != nil {
		t.Fatal(err)
	}
}

// TestWorkLeaseLapsesBackToTheQueue: a worker that acks an item and stops
// heartbeating loses it when its lease lapses: the next poll hands the
// item out again, and the old lease token's heartbeat is a 412 that
// carries the item's state, as the SDK's worker reads it.
func TestWorkLeaseLapsesBackToTheQueue(t *testing.T) {
	h := newSelfHosted(t, anthropictest.Script(anthropictest.Turn{Text: "hi"}),
		func(c *config.Config) { c.WorkQueue.LeaseTTL = config.Duration(2 * time.Second) })
	ctx := context.Background()
	s := newSession(t, h.c, h.agent.ID, h.env.ID)
	w := anthropic.NewClient(option.WithBaseURL(h.d.URL), option.WithAuthToken(h.envKey), option.WithMaxRetries(0))
	poll := func() *anthropic.BetaSelfHostedWork {
		t.Helper()
		item, err := w.Beta.Environments.Work.Poll(ctx, h.env.ID, anthropic.BetaEnvironmentWorkPollParams{
			BlockMs: anthropic.Int(999), AnthropicWorkerID: anthropic.String("w1")})
		if err != nil {
			t.Fatal(err)
		}
		return item
	}
	item := poll()
	if item == nil || item.Data.ID != s.ID || item.State != "queued" {
		t.Fatalf("poll: %v", item)
	}
	// Polled and not acked: not handed out again within the reclaim age.
	if again, err := w.Beta.Environments.Work.Poll(ctx, h.env.ID, anthropic.BetaEnvironmentWorkPollParams{}); err != nil || again != nil {
		t.Fatalf("second poll: %v %v", again, err)
	}
	st, err := w.Beta.Environments.Work.Stats(ctx, h.env.ID, anthropic.BetaEnvironmentWorkStatsParams{})
	if err != nil || st.Pending != 1 || st.Depth != 0 || st.WorkersPolling != 1 {
		t.Fatalf("stats %v %v", st, err)
	}
	acked, err := w.Beta.Environments.Work.Ack(ctx, item.ID, anthropic.BetaEnvironmentWorkAckParams{EnvironmentID: h.env.ID})
	if err != nil || acked.State != "starting" || acked.AcknowledgedAt == "" {
		t.Fatalf("ack %v %v", acked, err)
	}
	if _, err := w.Beta.Environments.Work.Ack(ctx, item.ID, anthropic.BetaEnvironmentWorkAckParams{EnvironmentID: h.env.ID}); err == nil {
		t.Fatal("a second ack was accepted")
	} else if code, _ := apiStatus(err); code != 409 {
		t.Fatalf("second ack: %v", err)
	}
	beat, err := w.Beta.Environments.Work.Heartbeat(ctx, item.ID, anthropic.BetaEnvironmentWorkHeartbeatParams{
		EnvironmentID: h.env.ID, ExpectedLastHeartbeat: anthropic.String("NO_HEARTBEAT")})
	if err != nil || !beat.LeaseExtended || beat.State != "active" || beat.TTLSeconds != 2 || beat.LastHeartbeat == "" {
		t.Fatalf("heartbeat %v %v", beat, err)
	}
	// The lease lapses: two seconds without a heartbeat.
	time.Sleep(2100 * time.Millisecond)
	again := poll()
	if again == nil || again.ID != item.ID || again.State != "queued" {
		t.Fatalf("after the lease lapsed the poll gave %v", again)
	}
	_, err = w.Beta.Environments.Work.Heartbeat(ctx, item.ID, anthropic.BetaEnvironmentWorkHeartbeatParams{
		EnvironmentID: h.env.ID, ExpectedLastHeartbeat: anthropic.String(beat.LastHeartbeat)})
	code, body := apiStatus(err)
	if code != 412 || !strings.Contains(body, `"state":"queued"`) || !strings.Contains(body, "heartbeat_precondition_failed") {
		t.Fatalf("stale heartbeat: %d %s", code, body)
	}
	// Stop: force ends it; a second stop conflicts.
	stopped, err := w.Beta.Environments.Work.Stop(ctx, item.ID, anthropic.BetaEnvironmentWorkStopParams{EnvironmentID: h.env.ID,
		BetaSelfHostedWorkStopRequest: anthropic.BetaSelfHostedWorkStopRequestParam{Force: anthropic.Bool(true)}})
	if err != nil || stopped.State != "stopped" {
		t.Fatalf("stop %v %v", stopped, err)
	}
	if _, err := w.Beta.Environments.Work.Stop(ctx, item.ID, anthropic.BetaEnvironmentWorkStopParams{EnvironmentID: h.env.ID}); err == nil {
		t.Fatal("a second stop was accepted")
	}
	// A user event to the dormant session queues fresh work.
	if _, err := h.c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("again")}}); err != nil {
		t.Fatal(err)
	}
	fresh := poll()
	if fresh == nil || fresh.ID == item.ID || fresh.Data.ID != s.ID {
		t.Fatalf("no fresh work after the session's new message: %v", fresh)
	}
}

// TestWorkGeneratedSDKCalls: the calls of the SDK's generated tests for
// Beta.Environments.Work (betaenvironmentwork_test.go), with their
// optional parameters (betas, the workspace header, block_ms=1,
// reclaim_older_than_ms=1, desired_ttl_seconds=0, force) and real ids.
func TestWorkGeneratedSDKCalls(t *testing.T) {
	h := newSelfHosted(t, anthropictest.Script(anthropictest.Turn{Text: "hi"}))
	ctx := context.Background()
	betas := []anthropic.AnthropicBeta{anthropic.AnthropicBetaMessageBatches2024_09_24}
	ws := anthropic.String("wrkspc_011CZkZaBF1tNoB5wlCeusgy")
	for i := 0; i < 2; i++ {
		newSession(t, h.c, h.agent.ID, h.env.ID)
	}
	c := anthropic.NewClient(option.WithBaseURL(h.d.URL), option.WithAPIKey(h.d.AdminKey), option.WithMaxRetries(0))
	item, err := c.Beta.Environments.Work.Poll(ctx, h.env.ID, anthropic.BetaEnvironmentWorkPollParams{
		BlockMs: anthropic.Int(1), ReclaimOlderThanMs: anthropic.Int(1), AnthropicWorkerID: anthropic.String("Anthropic-Worker-ID"), Betas: betas})
	if err != nil || item == nil {
		t.Fatalf("poll %v %v", item, err)
	}
	if _, err := c.Beta.Environments.Work.Ack(ctx, item.ID, anthropic.BetaEnvironmentWorkAckParams{EnvironmentID: h.env.ID, Betas: betas}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Beta.Environments.Work.Heartbeat(ctx, item.ID, anthropic.BetaEnvironmentWorkHeartbeatParams{EnvironmentID: h.env.ID,
		DesiredTTLSeconds: anthropic.Int(0), ExpectedLastHeartbeat: anthropic.String("NO_HEARTBEAT"), Betas: betas}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Beta.Environments.Work.Get(ctx, item.ID, anthropic.BetaEnvironmentWorkGetParams{EnvironmentID: h.env.ID, Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Beta.Environments.Work.Update(ctx, item.ID, anthropic.BetaEnvironmentWorkUpdateParams{EnvironmentID: h.env.ID,
		BetaSelfHostedWorkUpdateRequest: anthropic.BetaSelfHostedWorkUpdateRequestParam{Metadata: map[string]string{"foo": "string"}},
		Betas:                           betas, WorkspaceID: ws}); err != nil {
		t.Fatal(err)
	}
	first, err := c.Beta.Environments.Work.List(ctx, h.env.ID, anthropic.BetaEnvironmentWorkListParams{Limit: anthropic.Int(1), Betas: betas})
	if err != nil || len(first.Data) != 1 || first.NextPage == "" {
		t.Fatalf("list %v %v", first, err)
	}
	next, err := c.Beta.Environments.Work.List(ctx, h.env.ID, anthropic.BetaEnvironmentWorkListParams{Limit: anthropic.Int(1), Page: anthropic.String(first.NextPage), Betas: betas})
	if err != nil || len(next.Data) != 1 || next.Data[0].ID == first.Data[0].ID || next.NextPage != "" {
		t.Fatalf("list page 2 %v %v", next, err)
	}
	if _, err := c.Beta.Environments.Work.Stats(ctx, h.env.ID, anthropic.BetaEnvironmentWorkStatsParams{Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Beta.Environments.Work.Stop(ctx, item.ID, anthropic.BetaEnvironmentWorkStopParams{EnvironmentID: h.env.ID,
		BetaSelfHostedWorkStopRequest: anthropic.BetaSelfHostedWorkStopRequestParam{Force: anthropic.Bool(true)}, Betas: betas, WorkspaceID: ws}); err != nil {
		t.Fatal(err)
	}
}

// TestAgentkernelWorkerServesInItsSandboxes: agentkernel's own worker
// (internal/envworker, `agentkernel worker`) on another "machine" (a
// second daemon's sandbox layer) serves a remote daemon's self_hosted
// environment: the session's calls run in a sandbox of the worker's host,
// made for the session and kept for its next turn.
func TestAgentkernelWorkerServesInItsSandboxes(t *testing.T) {
	h := newSelfHosted(t, func(r anthropictest.Request) anthropictest.Turn {
		last := r.Blocks(len(r.Messages) - 1)
		for _, b := range last {
			if b.Type == "tool_result" {
				return anthropictest.Turn{Text: "got " + strings.TrimSpace(b.ToolResultText())}
			}
		}
		cmd := "cat f.txt"
		if strings.Contains(last[len(last)-1].Text, "write") {
			cmd = "echo sandboxed > f.txt; cat f.txt"
		}
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": cmd}}}}
	})
	host := daemontest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	tn, err := host.Store().GetTenantByName(ctx, auth.DefaultTenantName)
	if err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	w, err := envworker.New(envworker.Options{
		Client:        anthropic.NewClient(option.WithBaseURL(h.d.URL), option.WithMaxRetries(2)),
		EnvironmentID: h.env.ID, EnvironmentKey: h.envKey,
		Sandboxes: host.Sandboxes(), TenantID: tn.ID, Dir: t.TempDir(),
		Log: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	defer func() { cancel(); <-done }()

	s := newSession(t, h.c, h.agent.ID, h.env.ID)
	say := func(text, want string) {
		t.Helper()
		before := countEvents(h.c, s.ID, "agent.message")
		if _, err := h.c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText(text)}}); err != nil {
			t.Fatal(err)
		}
		evs := waitEndTurn(t, h.c, s.ID, 60*time.Second, logs.String)
		msgs := eventsOf(evs, "agent.message")
		if len(msgs) != before+1 || !strings.Contains(msgs[len(msgs)-1].RawJSON(), want) {
			t.Fatalf("%s: %d messages, the last %s\n%s", text, len(msgs), msgs[len(msgs)-1].RawJSON(), logs.String())
		}
	}
	say("write it", "got sandboxed")
	// The call ran in a sandbox of the worker's host, made for the session.
	sbs, err := host.Sandboxes().List(ctx, tn.ID, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(sbs) != 1 || sbs[0].SessionKey != s.ID {
		t.Fatalf("the worker host's sandboxes: %v", sbs)
	}
	if b, err := os.ReadFile(filepath.Join(host.Config.Home, "sandboxes", sbs[0].ID, "workspace", "f.txt")); err != nil || string(b) != "sandboxed\n" {
		t.Fatalf("the sandbox's workspace: %q %v", b, err)
	}
	// The next turn finds the same sandbox and its workspace.
	say("read it", "got sandboxed")
	if sbs, _ := host.Sandboxes().List(ctx, tn.ID, ""); len(sbs) != 1 {
		t.Fatalf("a second sandbox for the session: %v", sbs)
	}
}
