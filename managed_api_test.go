package agentkernel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

const testModel = "agentkernel-test-no-provider"

// sdkClient is the official Anthropic SDK pointed at agentkernel, exactly as
// a user would configure it.
func sdkClient(d *daemontest.Daemon, key string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(d.URL), option.WithAPIKey(key), option.WithMaxRetries(0))
}

// apiStatus returns the HTTP status of an SDK error (0 when err is not one)
// and its raw body.
func apiStatus(err error) (int, string) {
	var e *anthropic.Error
	if errors.As(err, &e) {
		return e.StatusCode, e.Error()
	}
	return 0, ""
}

func wantStatus(t *testing.T, what string, err error, status int, mentions ...string) {
	t.Helper()
	code, body := apiStatus(err)
	if code != status {
		t.Fatalf("%s: got %v, want HTTP %d", what, err, status)
	}
	for _, s := range mentions {
		if !strings.Contains(body, s) {
			t.Fatalf("%s: error %q does not mention %q", what, body, s)
		}
	}
}

func newAgent(t testing.TB, c anthropic.Client, name string) *anthropic.BetaManagedAgentsAgent {
	t.Helper()
	a, err := c.Beta.Agents.New(context.Background(), anthropic.BetaAgentNewParams{
		Name: name,
		// No provider serves this model, so turns the runtime starts end
		// at once with session.error and never reach a real model API.
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: testModel},
		Tools: []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
			Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401,
		}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func newEnv(t testing.TB, c anthropic.Client, name string) *anthropic.BetaEnvironment {
	t.Helper()
	e, err := c.Beta.Environments.New(context.Background(), anthropic.BetaEnvironmentNewParams{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func newSession(t testing.TB, c anthropic.Client, agentID, envID string) *anthropic.BetaManagedAgentsSession {
	t.Helper()
	s, err := c.Beta.Sessions.New(context.Background(), anthropic.BetaSessionNewParams{
		Agent:         anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(agentID)},
		EnvironmentID: envID,
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func userText(text string) anthropic.BetaManagedAgentsEventParamsUnion {
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
		Type: anthropic.BetaManagedAgentsUserMessageEventParamsTypeUserMessage,
		Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{
			OfText: &anthropic.BetaManagedAgentsTextBlockParam{Type: anthropic.BetaManagedAgentsTextBlockTypeText, Text: text},
		}},
	}}
}

// tenantKey makes a fresh tenant and returns a key of it.
func tenantKey(t *testing.T, d *daemontest.Daemon, name string) string {
	t.Helper()
	ctx := context.Background()
	admin := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	tn, err := admin.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	k, err := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "managed", TenantID: tn.ID})
	if err != nil {
		t.Fatal(err)
	}
	return k.Secret
}
