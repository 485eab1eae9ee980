package console_test

import (
	"context"
	"html"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// sandboxState is the sandbox's state as the API says it.
func sandboxState(t *testing.T, d *daemontest.Daemon, id string) string {
	t.Helper()
	var got struct{ State string }
	apiJSON(t, d, d.AdminKey, "GET", "/v1/sandboxes/"+id, nil, &got)
	return got.State
}

// apiFileStatus is the API's status for GET of a sandbox file.
func apiFileStatus(t *testing.T, d *daemontest.Daemon, id, name string) int {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, d.URL+"/v1/sandboxes/"+id+"/files/"+url.PathEscape(name), nil)
	req.Header.Set("x-api-key", d.AdminKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// lit is the state the page's state machine lights.
var lit = regexp.MustCompile(`<g class="m-state m-current"><rect[^>]*/><text[^>]*>([a-z]+)</text>`)

func litState(t *testing.T, body string) string {
	t.Helper()
	m := lit.FindAllStringSubmatch(body, -1)
	if len(m) != 1 {
		t.Fatalf("%d states lit in the state machine:\n%s", len(m), body)
	}
	return m[0][1]
}

// TestSandboxPages goes through a sandbox's life in the console: the list
// (filtered by state, with its metadata), its page (state lit, the times
// of its transitions, its limits), the file browser, a streamed command,
// stop, start and a confirmed destroy — each checked against what the API
// says.
func TestSandboxPages(t *testing.T) {
	d := daemontest.Start(t)
	var sb struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sandboxes", map[string]any{
		"metadata": map[string]string{"owner": "console-test", "purpose": "e2e"},
		"limits":   map[string]any{"memory_mb": 256, "pids": 128},
	}, &sb)
	b := newBrowser(t, d)
	b.login(d.AdminKey)
	page := "/console/sandboxes/" + sb.ID

	// The list, by state.
	_, body := b.do(http.MethodGet, "/console/sandboxes", nil, nil)
	if !strings.Contains(body, `href="`+page+`"`) || !strings.Contains(body, "owner=console-test, purpose=e2e") {
		t.Fatalf("the list does not show the sandbox and its metadata:\n%s", body)
	}
	if _, body := b.do(http.MethodGet, "/console/sandboxes?state=active", nil, nil); !strings.Contains(body, sb.ID) {
		t.Fatal("the active sandbox is not among the active ones")
	}
	if _, body := b.do(http.MethodGet, "/console/sandboxes?state=cold", nil, nil); strings.Contains(body, sb.ID) {
		t.Fatal("the active sandbox is listed as cold")
	}

	// Its page: the state lit, the limits, the transitions dated as the
	// API dates them.
	var times struct {
		StartedAt *time.Time `json:"started_at"`
		WarmedAt  *time.Time `json:"warmed_at"`
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/sandboxes/"+sb.ID, nil, &times)
	if times.StartedAt == nil || times.WarmedAt == nil || times.WarmedAt.Before(*times.StartedAt) {
		t.Fatalf("an active sandbox's started_at %v and warmed_at %v", times.StartedAt, times.WarmedAt)
	}
	resp, body := b.do(http.MethodGet, page, nil, nil)
	if resp.StatusCode != http.StatusOK || litState(t, body) != "active" || !strings.Contains(body, `<strong id="state">active</strong>`) {
		t.Fatalf("the sandbox page: %d\n%s", resp.StatusCode, body)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`<tr data-limit="memory_mb"><td>memory_mb</td><td>256</td>`),
		regexp.MustCompile(`<tr data-limit="pids"><td>pids</td><td>128</td>`),
		regexp.MustCompile(`<tr data-to="warming">\s*<td>cold → <strong>warming</strong></td>\s*<td><time datetime="` + regexp.QuoteMeta(times.StartedAt.Format("2006-01-02T15:04:05.000Z07:00")) + `"`),
		regexp.MustCompile(`<tr data-to="active">\s*<td>warming → <strong>active</strong></td>\s*<td><time datetime="` + regexp.QuoteMeta(times.WarmedAt.Format("2006-01-02T15:04:05.000Z07:00")) + `"[^<]*>[^<]*</time></td>\s*<td>[0-9.]+ m?s in warming</td>\s*<td>warm-up done · active for`),
		regexp.MustCompile(`owner</dt><dd class="mono">console-test</dd>`),
	} {
		if !want.MatchString(body) {
			t.Fatalf("the sandbox page lacks %s:\n%s", want, body)
		}
	}

	// The file browser: /workspace as the API lists it, a file written
	// through the API, by an absolute or a relative path, and downloaded.
	putFile(t, d, sb.ID, "notes%2Fhello.txt", "hello from the API\n")
	if _, body := b.do(http.MethodGet, page, nil, nil); !strings.Contains(body, `data-path="/workspace/notes">notes/</a>`) {
		t.Fatalf("the page's /workspace does not list notes/:\n%s", body)
	}
	resp, body = b.do(http.MethodGet, page+"/files?path="+url.QueryEscape("/workspace/notes"), nil, nil)
	if resp.StatusCode != http.StatusOK || !strings.Contains(body, `data-path="/workspace/notes/hello.txt">hello.txt</a>`) {
		t.Fatalf("the notes directory: %d\n%s", resp.StatusCode, body)
	}
	for _, p := range []string{"/workspace/notes/hello.txt", "notes/hello.txt"} {
		resp, body = b.do(http.MethodGet, page+"/files?path="+url.QueryEscape(p), nil, nil)
		if resp.StatusCode != http.StatusOK || !strings.Contains(body, `<pre class="file">hello from the API`+"\n</pre>") {
			t.Fatalf("the file at %s: %d\n%s", p, resp.StatusCode, body)
		}
	}
	// A name with spaces, '#', '?', '%' and non-ASCII: the page's own
	// link to it opens it.
	odd := "odd name #1 ?x=%41 é.txt"
	putFile(t, d, sb.ID, url.PathEscape("notes/"+odd), "odd\n")
	_, body = b.do(http.MethodGet, page+"/files?path="+url.QueryEscape("/workspace/notes"), nil, nil)
	m := regexp.MustCompile(`<a href="([^"]+)" data-path="` + regexp.QuoteMeta(html.EscapeString("/workspace/notes/"+odd)) + `">`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no link to %q:\n%s", odd, body)
	}
	if resp, body := b.do(http.MethodGet, html.UnescapeString(m[1]), nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, `<pre class="file">odd`+"\n</pre>") {
		t.Fatalf("the link %s: %d\n%s", m[1], resp.StatusCode, body)
	}
	resp, body = b.do(http.MethodGet, page+"/download?path="+url.QueryEscape("/workspace/notes/hello.txt"), nil, nil)
	if resp.StatusCode != http.StatusOK || body != "hello from the API\n" || resp.Header.Get("Content-Disposition") != "attachment; filename=hello.txt" {
		t.Fatalf("download: %d %q %q", resp.StatusCode, resp.Header.Get("Content-Disposition"), body)
	}

	// A path that climbs out with ".." gets the API's refusal, never the
	// file it would name once cleaned — however it is written.
	putFile(t, d, sb.ID, "%2Ftmp%2Fsecret.txt", "not through dot-dot\n")
	follow := &http.Client{Jar: b.c.Jar}
	for _, target := range []string{
		page + "/files?path=" + url.QueryEscape("/workspace/../tmp/secret.txt"),
		page + "/files?path=" + url.QueryEscape("../tmp/secret.txt"),
		page + "/download?path=" + url.QueryEscape("/workspace/../tmp/secret.txt"),
		page + "/files/workspace/../../tmp/secret.txt",
		page + "/files/workspace/%2E%2E/%2E%2E/tmp/secret.txt",
	} {
		resp, err := follow.Get(d.URL + target)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode/100 != 4 || strings.Contains(string(b), "not through dot-dot") {
			t.Fatalf("%s: %d, want a refusal and not the file:\n%s", target, resp.StatusCode, b)
		}
		if strings.Contains(target, "?path=") && !strings.Contains(html.UnescapeString(string(b)), `contains a ".." segment`) {
			t.Fatalf("%s does not show the API's refusal:\n%s", target, b)
		}
	}

	// The exec box: a POST without the token runs nothing.
	if resp, _ := b.do(http.MethodPost, page+"/exec", url.Values{"command": {"touch /workspace/ran"}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("exec without a token: %d", resp.StatusCode)
	}
	if code := apiFileStatus(t, d, sb.ID, "ran"); code != http.StatusNotFound {
		t.Fatalf("the refused command ran (GET of its file: %d)", code)
	}
	// With it, the output comes in pieces as the command writes it: the
	// command prints a line, waits for a file the test writes only once
	// the line is in hand, then prints another.
	tok := b.csrf(page)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	form := url.Values{"csrf": {tok}, "command": {"echo first; while [ ! -e /workspace/go ]; do sleep 0.05; done; echo second"}}
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, d.URL+page+"/exec", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", d.URL)
	req.Header.Set("Sec-Fetch-Site", "same-origin")
	req.Header.Set("X-Requested-With", "console")
	eresp, err := b.c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer eresp.Body.Close()
	if eresp.StatusCode != http.StatusOK || !strings.HasPrefix(eresp.Header.Get("Content-Type"), "text/plain") {
		t.Fatalf("exec: %d %s", eresp.StatusCode, eresp.Header.Get("Content-Type"))
	}
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), "first\n") {
		n, err := eresp.Body.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("the first line never came while the command ran: %v (got %q)", err, got.String())
		}
	}
	if strings.Contains(got.String(), "second") || strings.Contains(got.String(), "[exit") {
		t.Fatalf("output the command could not have written yet: %q", got.String())
	}
	putFile(t, d, sb.ID, "go", "")
	rest, err := io.ReadAll(eresp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out := got.String() + string(rest); !regexp.MustCompile(`^first\nsecond\n\n\[exit 0 after \d+ ms\]\n$`).MatchString(out) {
		t.Fatalf("exec output %q", out)
	}

	// Stop: cold, lit so, the stop dated and its backup listed; start:
	// active again, the first instance's times still on the page.
	if resp, body := b.do(http.MethodPost, page+"/stop", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("stop: %d %s", resp.StatusCode, body)
	}
	if st := sandboxState(t, d, sb.ID); st != "cold" {
		t.Fatalf("after stop the API says %s", st)
	}
	_, body = b.do(http.MethodGet, page, nil, nil)
	body = html.UnescapeString(body)
	if litState(t, body) != "cold" || !regexp.MustCompile(`<tr data-to="stopping">\s*<td>active → <strong>stopping</strong></td>[\s\S]*<tr data-to="cold">\s*<td>stopping → <strong>cold</strong></td>[\s\S]*in stopping</td>\s*<td>stopped · cold for`).MatchString(body) ||
		!regexp.MustCompile(`<td class="mono">bkp_[0-9a-z]+</td><td>1</td>`).MatchString(body) ||
		!strings.Contains(body, "The sandbox is not running") {
		t.Fatalf("the stopped sandbox's page:\n%s", body)
	}
	if resp, body := b.do(http.MethodPost, page+"/start", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("start: %d %s", resp.StatusCode, body)
	}
	if st := sandboxState(t, d, sb.ID); st != "active" {
		t.Fatalf("after start the API says %s", st)
	}
	_, body = b.do(http.MethodGet, page, nil, nil)
	if litState(t, body) != "active" || strings.Count(body, `<td>cold → <strong>warming</strong></td>`) != 2 ||
		strings.Count(body, `<td>warming → <strong>active</strong></td>`) != 2 ||
		!strings.Contains(body, `<time datetime="`+times.WarmedAt.Format("2006-01-02T15:04:05.000Z07:00")+`"`) {
		t.Fatalf("the restarted sandbox's page:\n%s", body)
	}

	// Destroy: asked on a page of its own; the sandbox's own forms, a POST
	// without the token or without the confirmation destroy nothing.
	_, body = b.do(http.MethodGet, page, nil, nil)
	if !strings.Contains(body, `href="`+page+`/destroy"`) || strings.Contains(body, `action="`+page+`/destroy"`) {
		t.Fatalf("the sandbox page should link to the destroy page, not destroy:\n%s", body)
	}
	_, body = b.do(http.MethodGet, page+"/destroy", nil, nil)
	if !strings.Contains(body, `action="`+page+`/destroy"`) || !strings.Contains(body, `name="confirm" value="`+sb.ID+`"`) {
		t.Fatalf("the destroy page:\n%s", body)
	}
	for _, f := range []url.Values{{"confirm": {sb.ID}}, {"csrf": {tok}}, {"csrf": {tok}, "confirm": {"sbx_other"}}} {
		if resp, _ := b.do(http.MethodPost, page+"/destroy", f, nil); resp.StatusCode/100 != 4 {
			t.Fatalf("destroy with %v: %d", f, resp.StatusCode)
		}
	}
	if st := sandboxState(t, d, sb.ID); st != "active" {
		t.Fatalf("after refused destroys the sandbox is %s", st)
	}
	if resp, body := b.do(http.MethodPost, page+"/destroy", url.Values{"csrf": {tok}, "confirm": {sb.ID}}, nil); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != page {
		t.Fatalf("destroy: %d %s", resp.StatusCode, body)
	}
	if st := sandboxState(t, d, sb.ID); st != "destroyed" {
		t.Fatalf("after destroy the API says %s", st)
	}
	_, body = b.do(http.MethodGet, page, nil, nil)
	if litState(t, body) != "destroyed" || !regexp.MustCompile(`<tr data-to="destroyed">\s*<td>active → <strong>destroyed</strong>`).MatchString(body) ||
		strings.Contains(body, `/destroy"`) {
		t.Fatalf("the destroyed sandbox's page:\n%s", body)
	}
}

// The sandbox pages' bad paths: another tenant's sandbox, a file path the
// API refuses, a lifecycle POST without its token.
func TestSandboxPagesRefuse(t *testing.T) {
	d := daemontest.Start(t)
	var sb struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sandboxes", map[string]any{}, &sb)
	b := newBrowser(t, d)
	b.login(d.AdminKey)

	// A path the API refuses shows the API's reason, and no file.
	resp, body := b.do(http.MethodGet, "/console/sandboxes/"+sb.ID+"/files?path="+url.QueryEscape(`/workspace/a\b`), nil, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "backslash") {
		t.Fatalf("a backslash path: %d\n%s", resp.StatusCode, body)
	}
	resp, body = b.do(http.MethodGet, "/console/sandboxes/"+sb.ID+"/files?path="+url.QueryEscape("/workspace/missing.txt"), nil, nil)
	if resp.StatusCode != http.StatusNotFound || !strings.Contains(html.UnescapeString(body), `file "/workspace/missing.txt" not found`) {
		t.Fatalf("a missing file: %d\n%s", resp.StatusCode, body)
	}

	// Stop without the token changes nothing; with it, the sandbox stops.
	if resp, _ := b.do(http.MethodPost, "/console/sandboxes/"+sb.ID+"/stop", url.Values{}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("stop without a token: %d", resp.StatusCode)
	}
	if st := sandboxState(t, d, sb.ID); st != "active" {
		t.Fatalf("after a refused stop the sandbox is %s", st)
	}
	tok := b.csrf("/console/sandboxes/" + sb.ID)
	if resp, body := b.do(http.MethodPost, "/console/sandboxes/"+sb.ID+"/stop", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("stop: %d %s", resp.StatusCode, body)
	}
	if st := sandboxState(t, d, sb.ID); st != "cold" && st != "stopping" {
		t.Fatalf("after stop the sandbox is %s", st)
	}

	// Another tenant sees nothing of it, and can do nothing to it.
	key := otherTenantKey(t, d)
	o := newBrowser(t, d)
	o.login(key)
	for _, path := range []string{"/console/sandboxes/" + sb.ID, "/console/sandboxes/" + sb.ID + "/files?path=%2Fworkspace",
		"/console/sandboxes/" + sb.ID + "/download?path=%2Fworkspace%2Fx", "/console/sandboxes/" + sb.ID + "/destroy"} {
		if resp, body := o.do(http.MethodGet, path, nil, nil); resp.StatusCode != http.StatusNotFound || !strings.Contains(body, "Not found") {
			t.Fatalf("another tenant's %s: %d\n%s", path, resp.StatusCode, body)
		}
	}
	if _, body := o.do(http.MethodGet, "/console/sandboxes", nil, nil); strings.Contains(body, sb.ID) {
		t.Fatal("another tenant's sandbox is listed")
	}
	otok := o.csrf("/console/sandboxes")
	if resp, _ := o.do(http.MethodPost, "/console/sandboxes/"+sb.ID+"/exec", url.Values{"csrf": {otok}, "command": {"true"}}, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("exec in another tenant's sandbox: %d", resp.StatusCode)
	}
	for _, action := range []string{"start", "destroy"} {
		if resp, _ := o.do(http.MethodPost, "/console/sandboxes/"+sb.ID+"/"+action, url.Values{"csrf": {otok}, "confirm": {sb.ID}}, nil); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("%s of another tenant's sandbox: %d", action, resp.StatusCode)
		}
	}
	if st := sandboxState(t, d, sb.ID); st != "cold" {
		t.Fatalf("after another tenant's start and destroy the sandbox is %s", st)
	}
}
