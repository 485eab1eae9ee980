package console_test

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestSessionThreads: a coordinator delegates to a worker of another
// model. The session's page lists the thread (agent, model, tokens, its
// cost at the worker's price) and adds it to the session's own cost; the
// thread's page shows its own log, its events' JSON is found through the
// thread only, its Interrupt button interrupts the thread alone and the
// interrupt arrives on its page live, and another tenant finds none of it.
func TestSessionThreads(t *testing.T) {
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		turn := anthropictest.Turn{InputTokens: 1000, OutputTokens: 100}
		for _, tool := range r.Tools {
			if strings.Contains(string(tool), `"create_thread"`) && r.AssistantTurns() == 0 {
				turn.ToolUses = []anthropictest.ToolUse{{Name: "create_thread", Input: map[string]any{"agent": "worker", "message": "look"}}}
				return turn
			}
		}
		if r.Model == "house-worker" {
			turn.Text = "looked"
		} else {
			turn.Text = "coordinated"
		}
		return turn
	})
	coordIn, coordOut, workerIn, workerOut := 2.0, 10.0, 1.0, 5.0
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"house-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
		c.Prices = map[string]config.PriceConfig{
			"house-coord":  {InputPerMTok: &coordIn, OutputPerMTok: &coordOut},
			"house-worker": {InputPerMTok: &workerIn, OutputPerMTok: &workerOut},
		}
	})
	var worker, coord, env, s struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/agents", map[string]any{"name": "worker", "model": "house-worker"}, &worker)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/agents", map[string]any{"name": "coordinator", "model": "house-coord",
		"multiagent": map[string]any{"type": "coordinator", "agents": []any{worker.ID}}}, &coord)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/environments", map[string]any{"name": "threads"}, &env)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sessions", map[string]any{"agent": coord.ID, "environment_id": env.ID}, &s)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sessions/"+s.ID+"/events", map[string]any{"events": []any{map[string]any{
		"type": "user.message", "content": []any{map[string]any{"type": "text", "text": "delegate"}}}}}, nil)

	// Both idle, with their usage: the session's own, the thread's.
	type usage struct {
		In  int64 `json:"input_tokens"`
		Out int64 `json:"output_tokens"`
	}
	var own, thread usage
	var threadID string
	deadline := time.Now().Add(time.Minute)
	for {
		var sess struct {
			Status string
			Usage  usage
		}
		var threads struct {
			Data []struct {
				ID             string
				Status         string
				ParentThreadID *string `json:"parent_thread_id"`
				Usage          usage
			}
		}
		apiJSON(t, d, d.AdminKey, "GET", "/v1/sessions/"+s.ID, nil, &sess)
		apiJSON(t, d, d.AdminKey, "GET", "/v1/sessions/"+s.ID+"/threads", nil, &threads)
		own = sess.Usage
		done := sess.Status == "idle" && own.In > 0
		for _, th := range threads.Data {
			if th.ParentThreadID != nil {
				threadID, thread = th.ID, th.Usage
				done = done && th.Status == "idle" && thread.In > 0
			}
		}
		if done && threadID != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no idle session and thread with usage after a minute: session %+v, threads %+v", sess, threads)
		}
		time.Sleep(20 * time.Millisecond)
	}
	usd := func(f float64) string { return fmt.Sprintf("$%.4f", f/1e6) }
	ownCost := float64(own.In)*coordIn + float64(own.Out)*coordOut
	threadCost := float64(thread.In)*workerIn + float64(thread.Out)*workerOut
	t.Logf("own usage %+v: %s; the thread's %+v: %s", own, usd(ownCost), thread, usd(threadCost))

	b := newBrowser(t, d)
	b.login(d.AdminKey)
	page := "/console/sessions/" + s.ID
	threadPage := page + "/threads/" + threadID
	_, body := b.do(http.MethodGet, page, nil, nil)
	cost := func(body, id string) string {
		m := regexp.MustCompile(`id="` + id + `"><span class="cost[^"]*" title="[^"]*">([^<]*)</span>`).FindStringSubmatch(body)
		if m == nil {
			return ""
		}
		return m[1]
	}
	if got := cost(body, "cost"); got != usd(ownCost) {
		t.Errorf("the session's own cost %q, want %s", got, usd(ownCost))
	}
	if got := cost(body, "cost-total"); got != usd(ownCost+threadCost) {
		t.Errorf("the cost with its threads %q, want %s (own %s + thread %s)", got, usd(ownCost+threadCost), usd(ownCost), usd(threadCost))
	}
	row := regexp.MustCompile(`<tr data-thread="` + threadID + `">[\s\S]*?</tr>`).FindString(body)
	for _, want := range []string{`href="` + threadPage + `"`, "worker", "house-worker", ">idle<", ">" + usd(threadCost) + "<"} {
		if !strings.Contains(row, want) {
			t.Errorf("the thread's row lacks %q:\n%s", want, row)
		}
	}

	// The thread's page: its own log (the worker's answer, not the
	// coordinator's), its cost.
	resp, body := b.do(http.MethodGet, threadPage, nil, nil)
	if resp.StatusCode != http.StatusOK || cost(body, "cost") != usd(threadCost) || !strings.Contains(body, "looked") || strings.Contains(body, "coordinated") {
		t.Fatalf("the thread's page: %d, cost %q\n%s", resp.StatusCode, cost(body, "cost"), body)
	}
	eid := regexp.MustCompile(`<li class="ev k-agent[^"]*" id="(sevt_[^"]+)"`).FindStringSubmatch(body)
	if eid == nil {
		t.Fatalf("no agent event on the thread's page:\n%s", body)
	}
	if resp, js := b.do(http.MethodGet, threadPage+"/events/"+eid[1], nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(js, "looked") {
		t.Fatalf("the thread event's JSON: %d %s", resp.StatusCode, js)
	}
	if resp, _ := b.do(http.MethodGet, page+"/events/"+eid[1], nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("the thread's event through the session's log: %d, want 404", resp.StatusCode)
	}

	// Another tenant: neither the thread's page nor its event.
	o := newBrowser(t, d)
	o.login(otherTenantKey(t, d))
	for _, p := range []string{threadPage, threadPage + "/events/" + eid[1]} {
		if resp, _ := o.do(http.MethodGet, p, nil, nil); resp.StatusCode != http.StatusNotFound {
			t.Errorf("another tenant's %s: %d, want 404", p, resp.StatusCode)
		}
	}

	// In chromium: the thread's page; its Interrupt button interrupts the
	// thread alone, and the interrupt arrives on the page live.
	p := newPage(t, d.URL)
	p.run("log in", chromedp.Navigate(d.URL+"/console/login"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", d.AdminKey), chromedp.Submit("#key"), chromedp.WaitVisible("form.logout"))
	p.run("thread page", chromedp.Navigate(d.URL+threadPage), chromedp.WaitVisible(chromedp.CSS("#events li.k-agent")))
	p.check("thread")
	p.run("interrupt the thread", chromedp.Click(chromedp.CSS("#interrupt button")),
		chromedp.WaitVisible(chromedp.CSS(`#events li[data-type="user.interrupt"]`)))
	inLog := func(path string) bool {
		var evs struct{ Data []struct{ Type string } }
		apiJSON(t, d, d.AdminKey, "GET", path, nil, &evs)
		for _, e := range evs.Data {
			if e.Type == "user.interrupt" {
				return true
			}
		}
		return false
	}
	if !inLog("/v1/sessions/"+s.ID+"/threads/"+threadID+"/events") || inLog("/v1/sessions/"+s.ID+"/events") {
		t.Fatal("the thread page's interrupt should be in the thread's log, not the session's")
	}
}
