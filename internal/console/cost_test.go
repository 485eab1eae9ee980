package console_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestSessionCost: a session's cost is its usage at its model's price —
// a [prices] entry, or the built-in list for a Claude model — on the
// sessions list and on the session's page; a model with no price shows a
// dash that says so, never $0.
func TestSessionCost(t *testing.T) {
	// Every turn: 1,200 input, 340 output, 5,000 cache read and 800 cache
	// write tokens.
	fake := anthropictest.New(t, func(anthropictest.Request) anthropictest.Turn {
		return anthropictest.Turn{Text: "Done.", InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 5000, CacheCreationTokens: 800}
	})
	in, out, read, write := 2.0, 10.0, 0.2, 2.5
	d := daemontest.Start(t, func(c *config.Config) {
		route := config.ModelConfig{Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}
		c.Models = map[string]config.ModelConfig{"claude-*": route, "house-*": route, "unpriced-*": route}
		c.Prices = map[string]config.PriceConfig{"house-*": {InputPerMTok: &in, OutputPerMTok: &out, CacheReadPerMTok: &read, CacheWritePerMTok: &write}}
	})
	want := map[string]string{
		// 1200×2 + 340×10 + 5000×0.2 + 800×2.5 = 8,800 µ$
		"house-model": "$0.0088",
		// Sonnet 4.5's list price, 3/15/0.3/3.75: 3600 + 5100 + 1500 + 3000
		"claude-sonnet-4-5": "$0.0132",
		"unpriced-model":    "—",
	}
	sids := map[string]string{}
	for m := range want {
		sid := sessionOfModel(t, d, m)
		apiJSON(t, d, d.AdminKey, "POST", "/v1/sessions/"+sid+"/events", map[string]any{"events": []any{map[string]any{
			"type": "user.message", "content": []any{map[string]any{"type": "text", "text": "hello"}}}}}, nil)
		sids[m] = sid
	}
	for _, sid := range sids {
		waitUsage(t, d, sid)
	}

	b := newBrowser(t, d)
	b.login(d.AdminKey)
	_, list := b.do(http.MethodGet, "/console/sessions", nil, nil)
	cost := regexp.MustCompile(`<span class="cost[^"]*" title="([^"]*)">([^<]*)</span>`)
	for m, sid := range sids {
		row := rowOf(t, list, sid)
		got := cost.FindStringSubmatch(row)
		if got == nil || got[2] != want[m] {
			t.Errorf("%s: the list's row shows cost %q, want %s:\n%s", m, got, want[m], row)
		}
		_, page := b.do(http.MethodGet, "/console/sessions/"+sid, nil, nil)
		_, after, _ := strings.Cut(page, `id="cost"`)
		got = cost.FindStringSubmatch(after)
		if got == nil || got[2] != want[m] {
			t.Errorf("%s: the session page shows cost %q, want %s", m, got, want[m])
			continue
		}
		title := got[1]
		switch m {
		case "house-model":
			if !strings.Contains(title, "[prices.&#34;house-*&#34;]") || !strings.Contains(title, "$2 input, $10 output, $0.2 cache read, $2.5 cache write") {
				t.Errorf("house-model's cost title %q", title)
			}
		case "claude-sonnet-4-5":
			if !strings.Contains(title, "built-in list (claude-sonnet-4-5*") {
				t.Errorf("claude-sonnet-4-5's cost title %q", title)
			}
		case "unpriced-model":
			if !strings.Contains(title, "No price is set for model &#34;unpriced-model&#34;") {
				t.Errorf("unpriced-model's cost title %q", title)
			}
		}
	}
}

// sessionOfModel makes an agent of the model, an environment and a
// session.
func sessionOfModel(t *testing.T, d *daemontest.Daemon, model string) string {
	t.Helper()
	var agent, env, s struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/agents", map[string]any{"name": model, "model": model}, &agent)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/environments", map[string]any{"name": model}, &env)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sessions", map[string]any{"agent": agent.ID, "environment_id": env.ID}, &s)
	return s.ID
}

// waitUsage waits until the session's turn ended with its usage recorded
// (one store write ends the turn and records it).
func waitUsage(t *testing.T, d *daemontest.Daemon, sid string) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		var s struct {
			Status string
			Usage  struct {
				InputTokens int64 `json:"input_tokens"`
			}
		}
		apiJSON(t, d, d.AdminKey, "GET", "/v1/sessions/"+sid, nil, &s)
		if s.Status == "idle" && s.Usage.InputTokens > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("session %s: no usage after a minute (status %s)", sid, s.Status)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rowOf is the list's table row of the session.
func rowOf(t *testing.T, page, sid string) string {
	t.Helper()
	i := strings.Index(page, `href="/console/sessions/`+sid+`"`)
	if i < 0 {
		t.Fatalf("session %s is not in the list:\n%s", sid, page)
	}
	row, _, _ := strings.Cut(page[i:], "</tr>")
	return row
}
