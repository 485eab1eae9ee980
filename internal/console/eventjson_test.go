package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// An event's JSON is not on the session's page: its fold loads it from
// /console/sessions/{id}/events/{event} when opened.

// jsonMarker is in an event's JSON only: no view of the page shows it.
const jsonMarker = "seen-only-in-the-json"

// storeEvents writes a tool result of 40 lines and an event whose JSON
// carries jsonMarker straight into the store, and returns their ids and the
// output.
func storeEvents(t *testing.T, d *daemontest.Daemon, sid string) (marked, result, output string) {
	t.Helper()
	var lines []string
	for i := 1; i <= 40; i++ {
		lines = append(lines, fmt.Sprintf("output line %d", i))
	}
	output = strings.Join(lines, "\n")
	res, _ := json.Marshal(map[string]any{"type": "agent.tool_result", "is_error": false,
		"content": []any{map[string]any{"type": "text", "text": output}}})
	msg, _ := json.Marshal(map[string]any{"type": "agent.message", "marker": jsonMarker,
		"content": []any{map[string]any{"type": "text", "text": "the answer"}}})
	marked, result = ids.New("sevt"), ids.New("sevt")
	if _, err := d.Store().AppendEvents(context.Background(), sid, []store.NewEvent{
		{ID: result, Type: "agent.tool_result", Data: res},
		{ID: marked, Type: "agent.message", Data: msg},
	}); err != nil {
		t.Fatal(err)
	}
	return marked, result, output
}

// TestEventJSONIsLoadedOnDemand: the page links each event's fold to the
// event's JSON instead of carrying it; the route answers the event as
// text, and only through its own session and tenant.
func TestEventJSONIsLoadedOnDemand(t *testing.T) {
	d := daemontest.Start(t)
	sid := newSession(t, d, d.AdminKey)
	eid, rid, output := storeEvents(t, d, sid)
	b := newBrowser(t, d)
	b.login(d.AdminKey)

	resp, page := b.do(http.MethodGet, "/console/sessions/"+sid, nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("session page: %d", resp.StatusCode)
	}
	if strings.Contains(page, jsonMarker) {
		t.Fatal("the session page carries an event's raw JSON")
	}
	route := "/console/sessions/" + sid + "/events/" + eid
	if !strings.Contains(page, `href="`+route+`"`) {
		t.Fatalf("the event's fold does not link to %s", route)
	}
	// A long output: its first lines on the page, the rest at its text
	// route.
	if n := strings.Count(page, "output line 1\n"); n != 1 || !strings.Contains(page, "output line 12") || strings.Contains(page, "output line 13") {
		t.Fatalf("the long output on the page: its first line %d times, or beyond its first 12 lines", n)
	}
	textRoute := "/console/sessions/" + sid + "/events/" + rid + "/text"
	if !strings.Contains(page, `href="`+textRoute+`"`) {
		t.Fatalf("the output's fold does not link to %s", textRoute)
	}
	if resp, body := b.do(http.MethodGet, textRoute, nil, nil); resp.StatusCode != http.StatusOK || body != output || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("the output's text: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}

	// A long tool input (a file written whole): folded as a long output
	// is, the whole of it at its input route.
	var file []string
	for i := 1; i <= 400; i++ {
		file = append(file, fmt.Sprintf("file line %d", i))
	}
	use, _ := json.Marshal(map[string]any{"type": "agent.tool_use", "name": "write",
		"input": map[string]any{"path": "/workspace/long.txt", "content": strings.Join(file, "\n")}})
	uid := ids.New("sevt")
	if _, err := d.Store().AppendEvents(context.Background(), sid, []store.NewEvent{{ID: uid, Type: "agent.tool_use", Data: use}}); err != nil {
		t.Fatal(err)
	}
	_, page = b.do(http.MethodGet, "/console/sessions/"+sid, nil, nil)
	inputRoute := "/console/sessions/" + sid + "/events/" + uid + "/input"
	if !strings.Contains(page, `href="`+inputRoute+`"`) || !strings.Contains(page, "show the whole input (4 lines, ") || strings.Contains(page, "file line 400") {
		t.Fatalf("the long input's fold does not link to %s:\n%s", inputRoute, page)
	}
	if resp, body := b.do(http.MethodGet, inputRoute, nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `file line 400`) {
		t.Fatalf("the input's text: %d\n%s", resp.StatusCode, body)
	}

	resp, body := b.do(http.MethodGet, route, nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("event JSON: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	var ev map[string]any
	if err := json.Unmarshal([]byte(body), &ev); err != nil || ev["id"] != eid || ev["marker"] != jsonMarker {
		t.Fatalf("event JSON %v: %s", err, body)
	}
	if resp.Header.Get("Content-Security-Policy") == "" || resp.Header.Get("X-Content-Type-Options") != "nosniff" {
		t.Fatalf("event JSON without the console's headers: %v", resp.Header)
	}

	// Through another session of the tenant, or by another tenant: not found.
	other := newSession(t, d, d.AdminKey)
	if resp, body := b.do(http.MethodGet, "/console/sessions/"+other+"/events/"+eid, nil, nil); resp.StatusCode != http.StatusNotFound || strings.Contains(body, jsonMarker) {
		t.Fatalf("the event through another session: %d\n%s", resp.StatusCode, body)
	}
	ob := newBrowser(t, d)
	ob.login(otherTenantKey(t, d))
	if resp, body := ob.do(http.MethodGet, route, nil, nil); resp.StatusCode != http.StatusNotFound || strings.Contains(body, jsonMarker) {
		t.Fatalf("another tenant's event: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := b.do(http.MethodGet, "/console/sessions/"+sid+"/events/sevt_nope", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("an unknown event: %d", resp.StatusCode)
	}
}

// TestBrowserEventFoldLoadsItsJSON: opening an event's fold shows its JSON
// (fetched then, under the console's CSP), for an event the page rendered
// and for one that arrived live; a long output opens to its whole text
// (fetched too), its first lines once.
func TestBrowserEventFoldLoadsItsJSON(t *testing.T) {
	d := daemontest.Start(t)
	sid := newSession(t, d, d.AdminKey)
	eid, _, output := storeEvents(t, d, sid)
	p := newPage(t, d.URL)
	p.run("log in", chromedp.Navigate(d.URL+"/console/login"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", d.AdminKey), chromedp.Submit("#key"), chromedp.WaitVisible("form.logout"))
	p.run("open the session", chromedp.Navigate(d.URL+"/console/sessions/"+sid), chromedp.WaitVisible("#events"))
	wait := func(what, expr string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(p.ctx, time.Minute)
		defer cancel()
		if _, err := chromedp.Run(ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
			t.Fatalf("%s: %v\nbrowser faults: %v", what, err, p.errs)
		}
	}
	if eval[bool](p, "the page before a fold opens", fmt.Sprintf(`document.documentElement.innerHTML.includes(%q)`, jsonMarker)) {
		t.Fatal("the page carries the event's JSON before its fold is opened")
	}
	fold := fmt.Sprintf(`document.getElementById(%q).querySelector("details.ev-raw")`, eid)
	p.run("open the event's fold", chromedp.Click(fmt.Sprintf(`li[id="%s"] details.ev-raw > summary`, eid)))
	wait("the event's JSON", fold+`.querySelector("pre").textContent.includes(`+fmt.Sprintf("%q", jsonMarker)+`)`)
	var ev map[string]any
	if err := json.Unmarshal([]byte(eval[string](p, "the JSON shown", fold+`.querySelector("pre").textContent`)), &ev); err != nil || ev["id"] != eid {
		t.Fatalf("the fold shows %v (%v)", ev, err)
	}

	// The long output: opened, it reads whole, as the tool printed it.
	p.run("open the output", chromedp.Click(`li[data-type="agent.tool_result"] details.ev-fold > summary`))
	shown := `[...document.querySelectorAll('li[data-type="agent.tool_result"] details.ev-fold pre')].filter((e) => e.checkVisibility()).map((e) => e.textContent).join("\n")`
	wait("the whole output", shown+fmt.Sprintf(" === %q", output))

	// An event that arrives live has its fold too.
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sessions/"+sid+"/events", map[string]any{"events": []any{map[string]any{"type": "user.interrupt"}}}, nil)
	p.run("the live event", chromedp.WaitVisible(`li[data-type="user.interrupt"]`))
	p.run("open its fold", chromedp.Click(`li[data-type="user.interrupt"] details.ev-raw > summary`))
	wait("the live event's JSON", `document.querySelector('li[data-type="user.interrupt"] details.ev-raw pre').textContent.includes('"user.interrupt"')`)
	p.check("session-event-json")
}
