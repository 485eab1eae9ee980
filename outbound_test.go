package agentkernel_test

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/mcp/mcptest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestOutboundThroughTheSDK is issue 11 end to end, with the official SDK
// as the client and real parts everywhere but the model: a vault with an
// environment_variable credential for a local HTTPS API that requires a
// bearer, and a static_bearer credential for a local MCP server that
// requires one too; an environment whose limited networking allows the API
// only; an agent with the MCP server; a session with the vault. One turn
// calls the MCP tool, curls the API (the proxy substitutes the secret
// inside TLS), curls a host the policy does not allow (refused, saying
// why), and searches the sandbox for the secrets (absent). The audit trail
// and /metrics show the decisions, and no secret anywhere.
func TestOutboundThroughTheSDK(t *testing.T) {
	const apiSecret = "api-secret-7d1f2c"
	const mcpSecret = "mcp-secret-91ab3e"
	var apiSaw sync.Map // Authorization headers the API received
	api := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		apiSaw.Store(r.Header.Get("Authorization"), true)
		if r.Header.Get("Authorization") != "Bearer "+apiSecret {
			http.Error(w, "bad bearer", http.StatusUnauthorized)
			return
		}
		fmt.Fprint(w, "api says hello")
	}))
	defer api.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { fmt.Fprint(w, "other host") }))
	defer other.Close()
	caFile := filepath.Join(t.TempDir(), "api-ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: api.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	mcpSrv := mcptest.New(t, mcptest.Options{Token: mcpSecret})
	apiHost := api.Listener.Addr().String()
	otherHost := other.Listener.Addr().String()

	// The model: the MCP tool, the API, the other host, a search for the
	// secrets, then done.
	steps := []anthropictest.Turn{
		{ToolUses: []anthropictest.ToolUse{{Name: "mcp__docs__echo", Input: map[string]any{"text": "hi"}}}},
		{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": `curl -sS -m 20 -H "Authorization: Bearer $API_TOKEN" https://` + apiHost + `/; echo " [token=$API_TOKEN]"`}}}},
		{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "curl -sS -m 20 http://" + otherHost + "/"}}}},
		// Each secret in two halves, so the command (and its event) holds
		// neither, and grep reads the joined pattern from a pipe, so no
		// process's command line holds it either: only something in the
		// sandbox could.
		{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": `for s in ` + halves(apiSecret) + ` ` + halves(mcpSecret) + `; do
  env | grep -cFf <(printf '%s\n' "$s")
  cat /proc/[0-9]*/environ /proc/[0-9]*/cmdline 2>/dev/null | tr '\0' '\n' | grep -cFf <(printf '%s\n' "$s")
  grep -rIlFf <(printf '%s\n' "$s") /workspace /tmp /run /etc /.agentkernel 2>/dev/null
done; echo scan-done`}}}},
		{Text: "All done."},
		// The next turn, after the session's vault_ids were emptied.
		{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": `curl -sS -m 20 -H "Authorization: Bearer $API_TOKEN" https://` + apiHost + `/ 2>&1; echo " [token=$API_TOKEN]"`}}}},
		{Text: "Done again."},
	}
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		n := r.AssistantTurns()
		if n >= len(steps) {
			return anthropictest.Turn{Text: "no more steps"}
		}
		return steps[n]
	})
	var logs strings.Builder
	var logMu sync.Mutex
	d := daemontest.StartLogged(t, writerFunc(func(p []byte) (int, error) {
		logMu.Lock()
		defer logMu.Unlock()
		return logs.Write(p)
	}), func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
		c.Egress.UpstreamCAFiles = []string{caFile}
	})
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)

	v, err := c.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "outbound"})
	if err != nil {
		t.Fatal(err)
	}
	envCred, err := c.Beta.Vaults.Credentials.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		DisplayName: anthropic.String("api"),
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfEnvironmentVariable: &anthropic.BetaManagedAgentsEnvironmentVariableCreateParams{
			Type: anthropic.BetaManagedAgentsEnvironmentVariableCreateParamsTypeEnvironmentVariable, SecretName: "API_TOKEN", SecretValue: apiSecret,
			Networking:        anthropic.BetaManagedAgentsCredentialNetworkingParamsOfLimited([]string{apiHost}),
			InjectionLocation: anthropic.BetaManagedAgentsInjectionLocationParams{Header: anthropic.Bool(true)},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Beta.Vaults.Credentials.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{
			Type: anthropic.BetaManagedAgentsStaticBearerCreateParamsTypeStaticBearer, MCPServerURL: mcpSrv.URL, Token: mcpSecret,
		}},
	}); err != nil {
		t.Fatal(err)
	}
	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "limited",
		Config: anthropic.BetaEnvironmentNewParamsConfigUnion{OfCloud: &anthropic.BetaCloudConfigParams{
			Networking: anthropic.BetaCloudConfigParamsNetworkingUnion{OfLimited: &anthropic.BetaLimitedNetworkParams{AllowedHosts: []string{apiHost}}}}}})
	if err != nil {
		t.Fatal(err)
	}
	ag, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name: "outbound", Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		MCPServers: []anthropic.BetaManagedAgentsURLMCPServerParams{{Name: "docs", URL: mcpSrv.URL, Type: anthropic.BetaManagedAgentsURLMCPServerParamsTypeURL}},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{
			{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}},
			{OfMCPToolset: &anthropic.BetaManagedAgentsMCPToolsetParams{Type: anthropic.BetaManagedAgentsMCPToolsetParamsTypeMCPToolset, MCPServerName: "docs",
				DefaultConfig: anthropic.BetaManagedAgentsMCPToolsetDefaultConfigParams{PermissionPolicy: anthropic.BetaManagedAgentsMCPToolsetDefaultConfigParamsPermissionPolicyUnion{
					OfAlwaysAllow: &anthropic.BetaManagedAgentsAlwaysAllowPolicyParam{Type: anthropic.BetaManagedAgentsAlwaysAllowPolicyTypeAlwaysAllow}}}}},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(ag.ID)},
		EnvironmentID: env.ID, VaultIDs: []string{v.ID}})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.VaultIDs) != 1 || s.VaultIDs[0] != v.ID {
		t.Fatalf("session vault_ids %v", s.VaultIDs)
	}
	// Another tenant cannot name this vault: to it, it does not exist.
	ak := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	tn, err := ak.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: "other"})
	if err != nil {
		t.Fatal(err)
	}
	key, err := ak.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "other", TenantID: tn.ID})
	if err != nil {
		t.Fatal(err)
	}
	oc := sdkClient(d, key.Secret)
	oAgent := newAgent(t, oc, "o")
	oEnv := newEnv(t, oc, "o")
	_, err = oc.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(oAgent.ID)},
		EnvironmentID: oEnv.ID, VaultIDs: []string{v.ID}})
	wantStatus(t, "another tenant's vault", err, 404, "vault_ids", v.ID)

	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("go")}}); err != nil {
		t.Fatal(err)
	}
	var mcpResult string
	var results []string
	var raw strings.Builder
	var sessionErrors []string
	untilIdle := func() {
		t.Helper()
		for stream.Next() {
			ev := stream.Current()
			raw.WriteString(ev.RawJSON())
			switch ev.Type {
			case "agent.mcp_tool_result":
				r := ev.AsAgentMCPToolResult()
				if r.IsError || len(r.Content) == 0 {
					t.Fatalf("MCP result %s", ev.RawJSON())
				}
				mcpResult = r.Content[0].Text
			case "agent.tool_result":
				var b strings.Builder
				for _, blk := range ev.AsAgentToolResult().Content {
					b.WriteString(blk.Text)
				}
				results = append(results, b.String())
			case "session.error":
				sessionErrors = append(sessionErrors, ev.AsSessionError().Error.Type)
			}
			if ev.Type == "session.status_idle" {
				return
			}
		}
	}
	untilIdle()
	if len(sessionErrors) != 0 {
		t.Fatalf("session errors %v", sessionErrors)
	}
	if mcpResult != "echo: hi" || mcpSrv.Calls.Load() != 1 {
		t.Fatalf("MCP tool: result %q, %d calls", mcpResult, mcpSrv.Calls.Load())
	}
	if len(results) != 3 {
		t.Fatalf("tool results %q", results)
	}
	// The API: reached, the secret substituted on the way; the sandbox
	// only ever held the placeholder.
	if !strings.Contains(results[0], "api says hello") || strings.Contains(results[0], apiSecret) || !strings.Contains(results[0], "[token=agentkernel-placeholder-"+envCred.ID+"]") {
		t.Fatalf("curl to the allowed API: %q", results[0])
	}
	if _, ok := apiSaw.Load("Bearer " + apiSecret); !ok {
		t.Fatal("the API never saw the real bearer")
	}
	// The other host: refused by the proxy, naming the policy.
	if !strings.Contains(results[1], "not allowed") || !strings.Contains(results[1], env.ID) || strings.Contains(results[1], "other host") {
		t.Fatalf("curl to a host the policy does not allow: %q", results[1])
	}
	// Nowhere in the sandbox: env, every process's environ and cmdline,
	// and the files a sandbox can write or was given.
	if scan := strings.Fields(results[2]); strings.Join(scan, " ") != "0 0 0 0 scan-done" {
		t.Fatalf("a secret is in the sandbox: %q", results[2])
	}

	// vault_ids changed between turns: from the next tool call on, the
	// sandbox has no placeholder and the proxy no credential.
	if _, err := c.Beta.Sessions.Update(ctx, s.ID, anthropic.BetaSessionUpdateParams{VaultIDs: []string{}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{userText("again")}}); err != nil {
		t.Fatal(err)
	}
	untilIdle()
	if len(results) != 4 || strings.Contains(results[3], "api says hello") || !strings.Contains(results[3], "[token=]") {
		t.Fatalf("after vault_ids were emptied: %q", results[3:])
	}
	// …and the MCP server, which needs the vault's bearer, says so.
	if strings.Join(sessionErrors, " ") != "mcp_authentication_failed_error" {
		t.Fatalf("session errors after vault_ids were emptied: %v", sessionErrors)
	}

	// The audit trail and the metrics say what happened, and hold no secret.
	code, out := call(t, "GET", d.URL+"/v1/audit?subject="+s.ID, d.AdminKey, "")
	if code != 200 {
		t.Fatalf("audit: %d %v", code, out)
	}
	auditJSON, _ := json.Marshal(out)
	for _, want := range []string{`"egress.injected"`, `"egress.refused"`, envCred.ID, otherHost[strings.LastIndex(otherHost, ":")+1:]} {
		if !strings.Contains(string(auditJSON), want) {
			t.Errorf("the session's audit trail lacks %s: %s", want, auditJSON)
		}
	}
	metrics := get(t, d.URL+"/metrics")
	for _, want := range []string{`agentkernel_egress_decisions_total{verdict="injected"}`, `agentkernel_egress_decisions_total{verdict="refused"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	logMu.Lock()
	daemonLog := logs.String()
	logMu.Unlock()
	for _, secret := range []string{apiSecret, mcpSecret} {
		for what, text := range map[string]string{"the audit trail": string(auditJSON), "/metrics": metrics, "the daemon's log": daemonLog, "the session's events": raw.String()} {
			if strings.Contains(text, secret) {
				t.Errorf("%s holds a secret", what)
			}
		}
	}
}

// halves is a shell word that expands to s without containing it.
func halves(s string) string { return `"` + s[:len(s)/2] + `""` + s[len(s)/2:] + `"` }

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

func get(t *testing.T, url string) string {
	t.Helper()
	res, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return string(b)
}
