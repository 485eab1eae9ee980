package console_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// TestBrowserAgentsAndEnvironments: an agent's page shows both its
// versions and the session that uses it; the environment's page shows its
// configuration and the same session; another tenant's agent is not found.
func TestBrowserAgentsAndEnvironments(t *testing.T) {
	d := daemontest.Start(t)
	var agent, env, s struct {
		ID      string
		Version int
	}
	apiJSON(t, d, d.AdminKey, "POST", "/v1/agents", map[string]any{"name": "writer", "model": "claude-sonnet-4-5", "system": "You write."}, &agent)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/agents/"+agent.ID, map[string]any{"version": agent.Version, "system": "You write well."}, nil)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/environments", map[string]any{"name": "box"}, &env)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sessions", map[string]any{"agent": agent.ID, "environment_id": env.ID}, &s)

	p := newPage(t, d.URL)
	p.run("log in", chromedp.Navigate(d.URL+"/console/login"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", d.AdminKey), chromedp.Submit("#key"), chromedp.WaitVisible("form.logout"))
	p.run("agents", chromedp.Navigate(d.URL+"/console/agents"), chromedp.WaitVisible(`a[href="/console/agents/`+agent.ID+`"]`))
	p.check("agents")
	p.run("agent", chromedp.Click(`a[href="/console/agents/`+agent.ID+`"]`), chromedp.WaitVisible(`a[href="/console/sessions/`+s.ID+`"]`))
	text := eval[string](p, "agent page", `document.querySelector("main").innerText`)
	if !strings.Contains(text, "v1") || !strings.Contains(text, "v2") || !strings.Contains(text, "You write well.") {
		t.Fatalf("agent page:\n%s", text)
	}
	p.check("agent")
	p.run("environments", chromedp.Navigate(d.URL+"/console/environments"), chromedp.WaitVisible(`a[href="/console/environments/`+env.ID+`"]`))
	p.check("environments")
	p.run("environment", chromedp.Click(`a[href="/console/environments/`+env.ID+`"]`), chromedp.WaitVisible(`a[href="/console/sessions/`+s.ID+`"]`))
	p.check("environment")

	key := otherTenantKey(t, d)
	o := newBrowser(t, d)
	o.login(key)
	for _, path := range []string{"/console/agents/" + agent.ID, "/console/environments/" + env.ID} {
		if resp, _ := o.do(http.MethodGet, path, nil, nil); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("another tenant's %s: %d", path, resp.StatusCode)
		}
	}
}

// TestAgentPageShowsItsConfigurationAndVersions: an agent's page shows
// each part of its configuration (system prompt, tools, MCP servers,
// multiagent roster) as the API holds it, lists its versions with a link
// to each, opens an older version's configuration, and lists the sessions
// of every version; an environment's page lists them too. Another
// tenant's agent, and its versions, are not found.
func TestAgentPageShowsItsConfigurationAndVersions(t *testing.T) {
	d := daemontest.Start(t)
	var helper, boss, env, s1, s2 struct {
		ID      string
		Version int
	}
	apiJSON(t, d, d.AdminKey, "POST", "/v1/agents", map[string]any{"name": "helper", "model": "claude-sonnet-4-5"}, &helper)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/agents", map[string]any{
		"name": "boss", "model": "claude-sonnet-4-5", "system": "You lead.\nAnd you <b>delegate</b>.",
		"mcp_servers": []any{map[string]any{"type": "url", "name": "docs", "url": "https://docs.example/mcp"}},
		"tools":       []any{map[string]any{"type": "mcp_toolset", "mcp_server_name": "docs"}},
		"multiagent":  map[string]any{"type": "coordinator", "agents": []any{helper.ID}},
	}, &boss)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/environments", map[string]any{"name": "box"}, &env)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sessions", map[string]any{"agent": boss.ID, "environment_id": env.ID, "title": "on version one"}, &s1)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/agents/"+boss.ID, map[string]any{"version": boss.Version, "system": "You lead well."}, nil)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sessions", map[string]any{"agent": boss.ID, "environment_id": env.ID, "title": "on version two"}, &s2)

	b := newBrowser(t, d)
	b.login(d.AdminKey)
	resp, body := b.do(http.MethodGet, "/console/agents/"+boss.ID, nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("agent page: %d\n%s", resp.StatusCode, body)
	}
	for _, want := range []string{
		`<pre class="file" id="system">You lead well.</pre>`,
		`MCP servers <span class="muted">(1)</span>`, `https://docs.example/mcp`,
		`Tools <span class="muted">(1)</span>`, `mcp_toolset`,
		`Multiagent roster`, `coordinator`, helper.ID,
		`<strong aria-current="true">v2</strong>`, `href="/console/agents/` + boss.ID + `?version=1">v1</a>`,
		`href="/console/sessions/` + s1.ID + `"`, `href="/console/sessions/` + s2.ID + `"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the agent page lacks %q", want)
		}
	}
	if strings.Contains(body, `id="old-version"`) {
		t.Error("the latest version is called old")
	}
	if t.Failed() {
		t.Fatal(body)
	}
	_, body = b.do(http.MethodGet, "/console/agents/"+boss.ID+"?version=1", nil, nil)
	if !strings.Contains(body, "You lead.\nAnd you &lt;b&gt;delegate&lt;/b&gt;.") || !strings.Contains(body, `id="old-version"`) ||
		!strings.Contains(body, `<strong aria-current="true">v1</strong>`) {
		t.Fatalf("version 1's page:\n%s", body)
	}
	if resp, _ := b.do(http.MethodGet, "/console/agents/"+boss.ID+"?version=7", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a version that does not exist: %d", resp.StatusCode)
	}
	_, body = b.do(http.MethodGet, "/console/environments/"+env.ID, nil, nil)
	if !strings.Contains(body, "on version one") || !strings.Contains(body, "on version two") || !strings.Contains(body, "Among the newest 2 sessions") {
		t.Fatalf("environment page:\n%s", body)
	}

	o := newBrowser(t, d)
	o.login(otherTenantKey(t, d))
	for _, path := range []string{"/console/agents/" + boss.ID, "/console/agents/" + boss.ID + "?version=1", "/console/environments/" + env.ID} {
		if resp, body := o.do(http.MethodGet, path, nil, nil); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "You lead") || strings.Contains(body, "on version") {
			t.Fatalf("another tenant's %s: %d", path, resp.StatusCode)
		}
	}
	if _, body := o.do(http.MethodGet, "/console/agents", nil, nil); strings.Contains(body, boss.ID) {
		t.Fatal("another tenant's agent is listed")
	}
}
