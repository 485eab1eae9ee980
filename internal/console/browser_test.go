package console_test

import (
	"context"
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

// browserModel: a message asking for "long" runs a command that takes a
// minute (to interrupt); any other runs a short command; a tool result
// is answered with what it printed.
func browserModel(r anthropictest.Request) anthropictest.Turn {
	last := r.Blocks(len(r.Messages) - 1)
	for _, b := range last {
		if b.Type == "tool_result" {
			return anthropictest.Turn{Text: "Done: " + strings.TrimSpace(b.ToolResultText())}
		}
	}
	text := ""
	for _, b := range last {
		text += b.Text
	}
	if strings.Contains(text, "long") {
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "sleep 60; echo never"}}}}
	}
	return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "sleep 1; echo tool-output-42"}}}}
}

// TestBrowserSessionLive: log in through the form, find the session in
// the list, open it, send a message from the page and watch the tool call,
// its output and the agent's answer arrive live (the page is never
// reloaded), then interrupt a long call with the button.
func TestBrowserSessionLive(t *testing.T) {
	fake := anthropictest.New(t, browserModel)
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	})
	sid := newSession(t, d, d.AdminKey)
	p := newPage(t, d.URL)

	p.run("login page", chromedp.Navigate(d.URL+"/console/sessions"), chromedp.WaitVisible("#key"))
	p.check("login")
	p.run("log in", chromedp.SendKeys("#key", d.AdminKey), chromedp.Submit("#key"),
		chromedp.WaitVisible("table.list"))
	if !eval[bool](p, "sessions list", fmt.Sprintf(`!!document.querySelector('a[href="/console/sessions/%s"]')`, sid)) {
		t.Fatal("the session is not in the list")
	}
	p.check("sessions")

	p.run("open the session", chromedp.Click(fmt.Sprintf(`a[href="/console/sessions/%s"]`, sid)),
		chromedp.WaitVisible("#send"))
	// A mark that a reload would wipe.
	eval[bool](p, "mark the page", `window.notReloaded = true`)
	p.check("session-empty")

	p.run("send a message", chromedp.SendKeys("#text", "run the tool"), chromedp.Click(`#send button[type=submit]`),
		chromedp.WaitVisible(`li[data-type="agent.tool_use"]`),
		chromedp.WaitVisible(`li[data-type="agent.tool_result"]`),
		chromedp.WaitVisible(`li[data-type="agent.message"]`))
	type trajectory struct {
		NotReloaded bool
		Result      string
		Answer      string
		Input       string
	}
	got := eval[trajectory](p, "read the trajectory", `({
		NotReloaded: window.notReloaded === true,
		Result: document.querySelector('li[data-type="agent.tool_result"] .ev-text').textContent,
		Answer: document.querySelector('li[data-type="agent.message"] .ev-text').textContent,
		Input: document.querySelector('li[data-type="agent.tool_use"] .ev-input').textContent,
	})`)
	if !got.NotReloaded || !strings.Contains(got.Result, "tool-output-42") || got.Answer != "Done: tool-output-42" || !strings.Contains(got.Input, "echo tool-output-42") {
		t.Fatalf("live trajectory: %+v", got)
	}
	p.run("idle again", chromedp.WaitVisible(`#status.s-idle`))
	p.check("session-turn")

	// Opened again, the page draws the turn: its model time and its tool
	// time (the command slept a second).
	p.run("reopen", chromedp.Navigate(d.URL+"/console/sessions/"+sid), chromedp.WaitVisible(".timeline"))
	type drawn struct {
		Turns, Model, Tool int
		Label              string
	}
	tl := eval[drawn](p, "timeline", `({Turns: document.querySelectorAll(".tl-turn").length, Model: document.querySelectorAll(".tl-model").length,
		Tool: document.querySelectorAll(".tl-tool").length, Label: document.querySelector(".tl-list li").textContent})`)
	if tl.Turns != 1 || tl.Model != 2 || tl.Tool != 1 || !regexp.MustCompile(`tools [1-9][0-9.]*s`).MatchString(tl.Label) {
		t.Fatalf("timeline: %+v", tl)
	}
	p.check("session-timeline")

	p.run("start a long call", chromedp.SendKeys("#text", "a long one"), chromedp.Click(`#send button[type=submit]`),
		chromedp.WaitVisible(`#status.s-running`))
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.querySelectorAll('li[data-type="agent.tool_use"]').length === 2`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the long call never showed: %v", err)
	}
	p.run("interrupt", chromedp.Click(`#interrupt button[type=submit]`),
		chromedp.WaitVisible(`li[data-type="user.interrupt"]`),
		chromedp.WaitVisible(`#status.s-idle`))
	p.check("session-interrupted")
	if n := eval[int](p, "results", `document.querySelectorAll('li[data-type="agent.tool_result"]').length`); n != 2 {
		t.Fatalf("%d tool results after the interrupt; want the interrupted call's too", n)
	}
}

// TestBrowserSandbox: the sandbox list and page, with the state machine
// lit at its state, a file of /workspace shown from the file browser, and
// a command whose output arrives in the page while it still runs.
func TestBrowserSandbox(t *testing.T) {
	d := daemontest.Start(t)
	var sb struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sandboxes", map[string]any{}, &sb)
	putFile(t, d, sb.ID, "hello.txt", "hello from the workspace\n")
	p := newPage(t, d.URL)
	p.run("log in", chromedp.Navigate(d.URL+"/console/login"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", d.AdminKey), chromedp.Submit("#key"), chromedp.WaitVisible("form.logout"))
	p.run("sandboxes", chromedp.Navigate(d.URL+"/console/sandboxes"), chromedp.WaitVisible(`a[href="/console/sandboxes/`+sb.ID+`"]`))
	p.check("sandboxes")
	p.run("open the sandbox", chromedp.Click(`a[href="/console/sandboxes/`+sb.ID+`"]`), chromedp.WaitVisible("#exec"))
	if lit := eval[string](p, "state machine", `document.querySelector(".m-current text").textContent`); lit != "active" {
		t.Fatalf("the state machine lights %q", lit)
	}
	p.check("sandbox")

	p.run("run a command", chromedp.SendKeys("#command", "echo first; while [ ! -e /workspace/go ]; do sleep 0.1; done; echo second"),
		chromedp.Click(`#exec button[type=submit]`))
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("exec-output").textContent.includes("first")`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the command's first line never showed: %v", err)
	}
	// The command waits for the file: what the page shows came while it ran.
	if out := eval[string](p, "output", `document.getElementById("exec-output").textContent`); strings.Contains(out, "second") || strings.Contains(out, "[exit") {
		t.Fatalf("output before the command could end: %q", out)
	}
	putFile(t, d, sb.ID, "go", "")
	if _, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById("exec-output").textContent.includes("[exit 0")`, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		t.Fatalf("the command never ended in the page: %v", err)
	}
	if out := eval[string](p, "output", `document.getElementById("exec-output").textContent`); !strings.HasPrefix(out, "first\nsecond\n") {
		t.Fatalf("exec output %q", out)
	}
	p.check("sandbox-exec")

	p.run("open the file", chromedp.Navigate(d.URL+"/console/sandboxes/"+sb.ID), chromedp.WaitVisible(`a[data-path="/workspace/hello.txt"]`),
		chromedp.Click(`a[data-path="/workspace/hello.txt"]`), chromedp.WaitVisible("pre.file"))
	if text := eval[string](p, "file", `document.querySelector("pre.file").textContent`); text != "hello from the workspace\n" {
		t.Fatalf("file shown: %q", text)
	}
	p.check("sandbox-file")

	// Destroy, confirmed on its own page.
	p.run("ask to destroy", chromedp.Navigate(d.URL+"/console/sandboxes/"+sb.ID), chromedp.WaitVisible(`a[href$="/destroy"]`),
		chromedp.Click(`a[href$="/destroy"]`), chromedp.WaitVisible(`form[action$="/destroy"] button`))
	p.check("sandbox-destroy")
	p.run("destroy", chromedp.Click(`form[action$="/destroy"] button`), chromedp.WaitVisible("#state"))
	if lit := eval[string](p, "state machine", `document.querySelector(".m-current text").textContent`); lit != "destroyed" {
		t.Fatalf("after destroy the state machine lights %q", lit)
	}
	p.check("sandbox-destroyed")
}

// putFile writes a file of the sandbox's workspace through the API.
func putFile(t *testing.T, d *daemontest.Daemon, id, name, content string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPut, d.URL+"/v1/sandboxes/"+id+"/files/"+name, strings.NewReader(content))
	req.Header.Set("x-api-key", d.AdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("PUT %s: %s", name, resp.Status)
	}
}

// TestBrowserAnotherTenantsNotFound: another tenant's session and sandbox,
// opened by id, answer the Not found page, which is itself a checked page.
func TestBrowserAnotherTenantsNotFound(t *testing.T) {
	d := daemontest.Start(t)
	sid := newSession(t, d, d.AdminKey)
	var sb struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sandboxes", map[string]any{}, &sb)
	p := newPage(t, d.URL)
	p.run("log in", chromedp.Navigate(d.URL+"/console/login"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", otherTenantKey(t, d)), chromedp.Submit("#key"), chromedp.WaitVisible("form.logout"))
	for _, path := range []string{"/console/sessions/" + sid, "/console/sandboxes/" + sb.ID} {
		p.expect(http.StatusNotFound, path)
		p.run("open "+path, chromedp.Navigate(d.URL+path), chromedp.WaitVisible(chromedp.CSS("main h1")))
		if h1 := eval[string](p, "heading", `document.querySelector("h1").textContent`); h1 != "Not found" {
			t.Fatalf("%s: the page says %q", path, h1)
		}
		p.check("not-found-" + strings.Split(path, "/")[2])
	}
}
