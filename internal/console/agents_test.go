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
