package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// TestBrowserSessionScrollBack: a long session's page shows its newest 200
// events, and reading back up to the top of the trajectory pages the older
// ones in, 200 at a time, to the very first, each once (a duplicate would
// be a duplicate id, which the page check refuses).
func TestBrowserSessionScrollBack(t *testing.T) {
	d := daemontest.Start(t)
	sid := newSession(t, d, d.AdminKey)
	const total = 450
	var batch []store.NewEvent
	for i := range total {
		data, _ := json.Marshal(map[string]any{"type": "agent.message",
			"content": []any{map[string]any{"type": "text", "text": fmt.Sprintf("message %d", i)}}})
		batch = append(batch, store.NewEvent{ID: ids.New("sevt"), Type: "agent.message", Data: data})
	}
	if _, err := d.Store().AppendEvents(context.Background(), sid, batch); err != nil {
		t.Fatal(err)
	}

	p := newPage(t, d.URL)
	p.run("log in", chromedp.Navigate(d.URL+"/console/login"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", d.AdminKey), chromedp.Submit("#key"), chromedp.WaitVisible("form.logout"))
	p.run("open the session", chromedp.Navigate(d.URL+"/console/sessions/"+sid), chromedp.WaitVisible("#events"))
	first := func() string {
		return eval[string](p, "the first event shown", `document.querySelector("#events > li .ev-text").textContent`)
	}
	if got := first(); got != "message 250" {
		t.Fatalf("the page opens at %q, want the newest 200 (from message 250)", got)
	}
	wait := func(what, expr string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
		defer cancel()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	p.run("read the newest", chromedp.Evaluate[chromedp.Void](`window.scrollTo(0, document.body.scrollHeight)`))
	p.run("scroll back", chromedp.ScrollIntoView("#older"))
	wait("the page before", `document.querySelectorAll("#events > li").length === 400`)
	if got := first(); got != "message 50" {
		t.Fatalf("after one page back the first event is %q", got)
	}
	p.run("scroll back again", chromedp.ScrollIntoView("#older"))
	wait("the first page", `document.querySelectorAll("#events > li").length === 450 && !document.getElementById("older")`)
	if got := first(); got != "message 0" {
		t.Fatalf("scrolled back to the top, the first event is %q", got)
	}
	if got := eval[string](p, "the last event", `[...document.querySelectorAll("#events > li .ev-text")].pop().textContent`); !strings.HasPrefix(got, "message 449") {
		t.Fatalf("the last event shown is %q", got)
	}
	p.check("session-scrolled-back")
}
