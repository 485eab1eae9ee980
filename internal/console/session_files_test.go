package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
)

// TestBrowserSessionOutputFiles: what the agent wrote to
// /mnt/session/outputs is listed on the session's page and downloads, as
// an attachment, with what it wrote; through another session's page, or
// by another tenant, it is not found.
func TestBrowserSessionOutputFiles(t *testing.T) {
	fake := anthropictest.New(t, func(r anthropictest.Request) anthropictest.Turn {
		for _, b := range r.Blocks(len(r.Messages) - 1) {
			if b.Type == "tool_result" {
				return anthropictest.Turn{Text: "The report is in the outputs."}
			}
		}
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{
			"command": "mkdir -p /mnt/session/outputs/out && echo 'the <b>report</b>' > /mnt/session/outputs/out/report.html"}}}}
	})
	d := daemontest.Start(t, func(c *config.Config) {
		c.Models = map[string]config.ModelConfig{"claude-*": {Provider: config.ProviderAnthropic, BaseURL: fake.URL, APIKey: "sk-fake"}}
	})
	sid := newSession(t, d, d.AdminKey)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sessions/"+sid+"/events", map[string]any{"events": []any{map[string]any{
		"type": "user.message", "content": []any{map[string]any{"type": "text", "text": "write the report"}}}}}, nil)
	// The outputs become Files when the turn ends.
	var files struct {
		Data []struct{ ID, Filename string } `json:"data"`
	}
	deadline := time.Now().Add(time.Minute)
	for len(files.Data) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no output file in a minute")
		}
		time.Sleep(50 * time.Millisecond)
		apiJSON(t, d, d.AdminKey, "GET", "/v1/files?scope_id="+sid, nil, &files)
	}
	fid := files.Data[0].ID

	p := newPage(t, d.URL)
	p.run("log in", chromedp.Navigate(d.URL+"/console/login"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", d.AdminKey), chromedp.Submit("#key"), chromedp.WaitVisible("table.list"))
	p.run("open the session", chromedp.Navigate(d.URL+"/console/sessions/"+sid), chromedp.WaitVisible("section.outputs"))
	// The command reads as the model wrote it (the API's JSON escapes
	// &, < and > as \u0026, \u003c, \u003e).
	if in := eval[string](p, "the tool call", `document.querySelector('li[data-type="agent.tool_use"] .ev-input').textContent`); !strings.Contains(in, "&& echo 'the <b>report</b>' > /mnt/session/outputs") {
		t.Fatalf("the tool call's input on the page: %q", in)
	}
	type download struct {
		Name, Href, Status, Type, Disposition, Body string
	}
	ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
	defer cancel()
	got, err := chromedp.Run(ctx, chromedp.Evaluate[download](`(async () => {
		const a = document.querySelector("section.outputs a");
		const r = await fetch(a.href);
		return {Name: a.textContent, Href: a.getAttribute("href"), Status: String(r.status), Type: r.headers.get("Content-Type"),
			Disposition: r.headers.get("Content-Disposition"), Body: await r.text()};
	})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatal(err)
	}
	want := download{Name: "out/report.html", Href: fmt.Sprintf("/console/sessions/%s/files/%s", sid, fid), Status: "200",
		Type: "application/octet-stream", Disposition: "attachment; filename=report.html", Body: "the <b>report</b>\n"}
	if got != want {
		t.Fatalf("the output file on the page and its download:\n got %+v\nwant %+v", got, want)
	}
	p.check("session-outputs")

	// Only through its own session, and only for its tenant.
	b := newBrowser(t, d)
	b.login(d.AdminKey)
	other := newSession(t, d, d.AdminKey)
	if resp, body := b.do(http.MethodGet, "/console/sessions/"+other+"/files/"+fid, nil, nil); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "report") {
		t.Fatalf("the file through another session: %d\n%s", resp.StatusCode, body)
	}
	theirs := newBrowser(t, d)
	theirs.login(otherTenantKey(t, d))
	if resp, body := theirs.do(http.MethodGet, "/console/sessions/"+sid+"/files/"+fid, nil, nil); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "report") {
		t.Fatalf("the file by another tenant: %d\n%s", resp.StatusCode, body)
	}
	if _, body := theirs.do(http.MethodGet, "/console/sessions/"+sid, nil, nil); strings.Contains(body, fid) {
		t.Fatal("another tenant sees the session's files")
	}
}
