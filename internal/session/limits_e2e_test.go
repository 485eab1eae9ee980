package session_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestEnvironmentLimitsReachTheSessionSandbox: limits in an environment's
// agentkernel.* metadata are checked when the environment is created or
// updated (a bad value or an unknown agentkernel.* key is a 400 naming it)
// and applied to the sandbox of a session in it: the model's bash tool
// cannot fork past the environment's pids limit, and the sandbox reports
// the environment's limits in force.
func TestEnvironmentLimitsReachTheSessionSandbox(t *testing.T) {
	// In sh, not the tool's bash: bash retries a failed fork for seconds.
	const bomb = `sh -c 'i=0; while [ $i -lt 100 ]; do sleep 30 & i=$((i+1)); done; echo started $i'`
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		if r.AssistantTurns() == 0 {
			return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": bomb}}}}
		}
		return anthropictest.Turn{Text: "done"}
	})
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	})
	ctx := context.Background()
	c := anthropic.NewClient(option.WithBaseURL(d.URL), option.WithAPIKey(d.AdminKey), option.WithMaxRetries(0))

	for _, tc := range []struct {
		md       map[string]string
		mentions string
	}{
		{map[string]string{"agentkernel.pids": "0"}, `metadata.agentkernel.pids" = 0: 0 is not "no limit"`},
		{map[string]string{"agentkernel.pids": "8"}, "minimum of 16"},
		{map[string]string{"agentkernel.memory_mb": "99999"}, `metadata.agentkernel.memory_mb" = 99999: above the maximum of 8192 MB`},
		{map[string]string{"agentkernel.memory_mb": "4611686018427387904"}, "maximum of 8192"},
		{map[string]string{"agentkernel.memory_mb": "99999999999999999999"}, "64-bit integer"},
		{map[string]string{"agentkernel.cpus": "NaN"}, "not a finite number"},
		{map[string]string{"agentkernel.cpus": "-1"}, "minimum of 0.05"},
		{map[string]string{"agentkernel.cpus": "lots"}, "agentkernel.cpus"},
		{map[string]string{"agentkernel.memory": "512"}, `"metadata.agentkernel.memory" = "512": not a setting agentkernel knows`},
	} {
		_, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "bad", Metadata: tc.md})
		var apiErr *anthropic.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(strings.ReplaceAll(apiErr.Error(), `\"`, `"`), tc.mentions) {
			t.Errorf("environment metadata %v: %v, want 400 mentioning %q", tc.md, err, tc.mentions)
		}
	}

	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "small", Metadata: map[string]string{
		"agentkernel.memory_mb": "192", "agentkernel.pids": "64", "agentkernel.cpus": "0.5",
	}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Beta.Environments.Update(ctx, env.ID, anthropic.BetaEnvironmentUpdateParams{Metadata: map[string]string{"agentkernel.pids": "100000"}})
	if apiErr := (*anthropic.Error)(nil); !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Error(), "maximum of 4096") {
		t.Fatalf("update over the maximum: %v", err)
	}
	agent, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{
		Name:  "limits",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agent.ID)}, EnvironmentID: env.ID,
	})
	if err != nil {
		t.Fatal(err)
	}
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := c.Beta.Sessions.Events.StreamEvents(sctx, s.ID, anthropic.BetaSessionEventStreamParams{})
	defer stream.Close()
	if _, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{Events: []anthropic.BetaManagedAgentsEventParamsUnion{{
		OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Type: anthropic.BetaManagedAgentsUserMessageEventParamsTypeUserMessage,
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{
				OfText: &anthropic.BetaManagedAgentsTextBlockParam{Type: anthropic.BetaManagedAgentsTextBlockTypeText, Text: "fork"},
			}},
		},
	}}}); err != nil {
		t.Fatal(err)
	}
	var result string
	for stream.Next() {
		ev := stream.Current()
		if ev.Type == "session.error" {
			t.Fatalf("session error: %s", ev.RawJSON())
		}
		if ev.Type == "agent.tool_result" {
			result = ev.RawJSON()
		}
		if ev.Type == "session.status_idle" {
			break
		}
	}
	if result == "" {
		t.Fatalf("no tool result: %v", stream.Err())
	}
	if strings.Contains(result, "started 100") || !strings.Contains(result, "fork") {
		t.Fatalf("100 processes started under the environment's pids limit of 64: %s", result)
	}

	ak := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	list, err := ak.Sandboxes.List(ctx, "")
	if err != nil || len(list) != 1 || list[0].Metadata["agentkernel.session"] != s.ID {
		t.Fatalf("the session's sandbox: %+v %v", list, err)
	}
	sb, err := ak.Sandboxes.Get(ctx, list[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if sb.Limits != (agentkernel.SandboxLimits{MemoryMB: 192, Pids: 64, CPUs: 0.5}) {
		t.Fatalf("session sandbox limits %+v, want the environment's", sb.Limits)
	}
	for field, want := range map[string]float64{"memory_mb": 192, "pids": 64, "cpus": 0.5} {
		if e := sb.Runtime.Enforcement[field]; e.Value != want || !strings.HasPrefix(e.Mechanism, "cgroup") {
			t.Errorf("%s in force: %+v, want %v by a cgroup", field, e, want)
		}
	}
}
