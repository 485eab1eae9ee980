package console_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// The console in a real browser: Debian's chromium, driven through the
// DevTools protocol (chromedp). Every page must load with no console
// error, no failed request and no refused resource (the CSP reports its
// refusals as errors), and pass the accessibility basics.

// page is a browser tab on the console, recording what went wrong in it.
type page struct {
	t    *testing.T
	ctx  context.Context
	base string
	mu   sync.Mutex
	errs []string
	// shots is where screenshots go (the test's artifact directory).
	shots string
}

func newPage(t *testing.T, base string) *page {
	t.Helper()
	chrome := testenv.Command(t, "chromium", "apt-get install chromium; scripts/test.sh installs it")
	profile, err := os.MkdirTemp("", "akchrome")
	if err != nil {
		t.Fatal(err)
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chrome), chromedp.NoSandbox, chromedp.Headless, chromedp.DisableGPU,
		chromedp.UserDataDir(profile), chromedp.WindowSize(1280, 900))
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	p := &page{t: t, ctx: ctx, base: base, shots: t.ArtifactDir()}
	t.Cleanup(func() {
		// Ends the browser and waits for it, then removes its profile.
		_ = chromedp.Cancel(ctx)
		cancel()
		cancelAlloc()
		os.RemoveAll(profile)
	})
	if err := chromedp.Listen(ctx, func(ev any) {
		switch e := ev.(type) {
		case *runtime.EventExceptionThrown:
			p.fault("exception: %s %s", e.ExceptionDetails.Text, exceptionText(e.ExceptionDetails))
		case *runtime.EventConsoleAPICalled:
			if e.Type == runtime.ConsoleAPICalledTypeError || e.Type == runtime.ConsoleAPICalledTypeAssert {
				var args []string
				for _, a := range e.Args {
					args = append(args, fmt.Sprint(a.Value)+a.Description)
				}
				p.fault("console.%s: %s", e.Type, strings.Join(args, " "))
			}
		case *cdplog.EventEntryAdded:
			if e.Entry.Level == cdplog.EntryLevelError {
				p.fault("log (%s): %s %s", e.Entry.Source, e.Entry.Text, e.Entry.URL)
			}
		case *network.EventLoadingFailed:
			if !e.Canceled {
				p.fault("request failed: %s (%s)", e.ErrorText, e.BlockedReason)
			}
		case *network.EventResponseReceived:
			if e.Response.Status >= 400 {
				p.fault("HTTP %d for %s", e.Response.Status, e.Response.URL)
			}
		}
	}); err != nil {
		t.Fatal(err)
	}
	for _, err := range []error{
		call(ctx, network.Enable, network.EnableParams{}),
		call(ctx, runtime.Enable, cdp.Empty{}),
		call(ctx, cdplog.Enable, cdp.Empty{}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func call[P, R any](ctx context.Context, cmd cdp.Command[P, R], params P) error {
	_, err := chromedp.Call(ctx, cmd, params)
	return err
}

func exceptionText(d *runtime.ExceptionDetails) string {
	if d.Exception != nil {
		return d.Exception.Description
	}
	return ""
}

func (p *page) fault(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.errs = append(p.errs, fmt.Sprintf(format, args...))
}

// run runs browser actions, failing the test on an error.
func (p *page) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		p.t.Fatalf("%s: %v\nbrowser faults: %v", what, err, p.errs)
	}
}

// eval evaluates a script in the page and returns its value.
func eval[T any](p *page, what, expr string) T {
	p.t.Helper()
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		p.t.Fatalf("%s: %v\nbrowser faults: %v", what, err, p.errs)
	}
	return v
}

// check fails the test on anything that went wrong in the page so far,
// checks the accessibility basics of the page shown and keeps a
// screenshot of it.
func (p *page) check(name string) {
	p.t.Helper()
	p.mu.Lock()
	errs := append([]string(nil), p.errs...)
	p.mu.Unlock()
	if len(errs) > 0 {
		p.t.Fatalf("page %s: %d browser faults:\n%s", name, len(errs), strings.Join(errs, "\n"))
	}
	violations := eval[[]string](p, "accessibility check of "+name, a11yCheck)
	if len(violations) > 0 {
		p.t.Fatalf("page %s: accessibility:\n%s", name, strings.Join(violations, "\n"))
	}
	// The keyboard reaches the page's controls in order: from the skip
	// link, each Tab lands on the next of them (the first 30 are tried).
	want := eval[[]string](p, "focusable controls", `(() => {
		const els = [...document.querySelectorAll('a[href], button, input:not([type=hidden]), select, textarea, summary')]
			.filter((el) => !el.disabled && el.checkVisibility({checkVisibilityCSS: true, contentVisibilityAuto: true}) && el.tabIndex >= 0);
		els.forEach((el, i) => el.dataset.kbd = i);
		document.querySelector('.skip').focus();
		return els.slice(1, 31).map((el) => el.dataset.kbd);
	})()`)
	for i, w := range want {
		p.run("Tab", chromedp.KeyEvent("\t"))
		if got := eval[string](p, "focus", `document.activeElement.dataset.kbd || document.activeElement.tagName`); got != w {
			p.t.Fatalf("page %s: keyboard: Tab %d lands on %s, want control %s", name, i+1, got, w)
		}
	}
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		p.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(p.shots, name+".png"), png, 0o644); err != nil {
		p.t.Fatal(err)
	}
}

// a11yCheck lists what a page misses of the accessibility basics.
const a11yCheck = `(() => {
  const v = [];
  const name = (el) => (el.getAttribute("aria-label") || el.getAttribute("aria-labelledby") || el.textContent || el.value || el.title || "").trim();
  for (const el of document.querySelectorAll("input:not([type=hidden]), select, textarea")) {
    const byFor = el.id && document.querySelector('label[for="' + CSS.escape(el.id) + '"]');
    if (!byFor && !el.closest("label") && !el.getAttribute("aria-label") && !el.getAttribute("aria-labelledby")) v.push("no label: " + el.outerHTML.slice(0, 100));
  }
  for (const el of document.querySelectorAll("button, a[href], summary")) if (!name(el)) v.push("no accessible name: " + el.outerHTML.slice(0, 100));
  for (const el of document.querySelectorAll("img")) if (!el.hasAttribute("alt")) v.push("img without alt: " + el.outerHTML.slice(0, 100));
  for (const el of document.querySelectorAll("[tabindex]")) if (+el.getAttribute("tabindex") > 0) v.push("positive tabindex: " + el.outerHTML.slice(0, 100));
  for (const el of document.querySelectorAll("th")) if (!el.getAttribute("scope")) v.push("th without scope: " + el.outerHTML.slice(0, 100));
  const h1 = document.querySelectorAll("h1").length;
  if (h1 !== 1) v.push("h1 count " + h1);
  if (!document.querySelector("main")) v.push("no main landmark");
  if (!document.documentElement.lang) v.push("no lang on html");
  if (!document.title.trim()) v.push("no title");
  const ids = new Set();
  for (const el of document.querySelectorAll("[id]")) { if (ids.has(el.id)) v.push("duplicate id " + el.id); ids.add(el.id); }
  return v;
})()`

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
