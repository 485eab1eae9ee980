package console_test

import (
	"fmt"
	"html"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/console"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// counterApp is an app dir holding the test counter object server.
func counterApp(t *testing.T) string {
	return filepath.Dir(testenv.StaticBinary(t, "github.com/agentkernel/agentkernel/internal/object/testdata/counter"))
}

// TestBrowserObjects: the objects page lists the class and the object; the
// object's page shows its storage as the API holds it, its alarm and its
// audit record; the audit log lists the record; another tenant's object
// is not found.
func TestBrowserObjects(t *testing.T) {
	app := counterApp(t)
	d := daemontest.Start(t, func(c *config.Config) {
		c.Objects = []config.ObjectClassConfig{{Class: "wcounter", InitCommand: []string{"/app/counter"}, AppDir: app, StorageMode: "write-through"}}
		c.DurableObjects.AppRoots = []string{app}
	})
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, d.URL+"/v1/objects/wcounter/c1", nil)
		req.Header.Set("x-api-key", d.AdminKey)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	for range 3 {
		apiJSON(t, d, d.AdminKey, "POST", "/v1/objects/wcounter/c1/call", map[string]any{"method": "increment"}, nil)
	}
	fire := time.Now().Add(time.Hour).UTC()
	apiJSON(t, d, d.AdminKey, "POST", "/v1/objects/wcounter/c1/alarms", map[string]any{"method": "increment", "fire_at": fire.Format(time.RFC3339)}, nil)

	p := newPage(t, d.URL)
	p.run("log in", chromedp.Navigate(d.URL+"/console/login"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", d.AdminKey), chromedp.Submit("#key"), chromedp.WaitVisible("form.logout"))
	p.run("objects", chromedp.Navigate(d.URL+"/console/objects"), chromedp.WaitVisible(`a[href="/console/objects/wcounter/c1"]`))
	p.check("objects")
	p.run("open the object", chromedp.Click(`a[href="/console/objects/wcounter/c1"]`), chromedp.WaitVisible("table.storage"))
	type objectView struct {
		Storage string
		Alarm   string
		Audit   string
	}
	got := eval[objectView](p, "object page", `({
		Storage: [...document.querySelectorAll("table.storage tr")].map((tr) => tr.innerText.replace(/\s+/g, " ").trim()).join("|"),
		Alarm: [...document.querySelectorAll("h2")].find((h) => h.textContent === "Alarms").nextElementSibling.textContent,
		Audit: [...document.querySelectorAll("h2")].find((h) => h.textContent === "Audit").nextElementSibling.textContent,
	})`)
	if !strings.Contains(got.Storage, "count 3") || !strings.Contains(got.Alarm, "increment") || !strings.Contains(got.Alarm, fire.Format("2006-01-02 15:04")) ||
		!strings.Contains(got.Audit, "ObjectCreated") {
		t.Fatalf("object page: %+v", got)
	}
	p.check("object")
	p.run("audit log", chromedp.Navigate(d.URL+"/console/audit?subject=wcounter/c1"), chromedp.WaitVisible("#f-subject"))
	if text := eval[string](p, "audit", `document.querySelector("main").textContent`); !strings.Contains(text, "ObjectCreated") {
		t.Fatalf("audit log: %s", text)
	}
	p.check("audit")

	key := otherTenantKey(t, d)
	o := newBrowser(t, d)
	o.login(key)
	if resp, _ := o.do(http.MethodGet, "/console/objects/wcounter/c1", nil, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("another tenant's object: %d", resp.StatusCode)
	}
	if _, body := o.do(http.MethodGet, "/console/objects", nil, nil); strings.Contains(body, "wcounter/c1") {
		t.Fatal("another tenant's object is listed")
	}
}

// TestObjectStorageViewer: an object's page shows each storage key with
// its value as pretty JSON, escaped; a long value is folded to its first
// lines with the whole value behind; the page lists the object's audit
// records and the audit log says its order. Another tenant gets Not found
// for the object and its page, and no list shows it.
func TestObjectStorageViewer(t *testing.T) {
	app := counterApp(t)
	d := daemontest.Start(t, func(c *config.Config) {
		c.Objects = []config.ObjectClassConfig{{Class: "wcounter", InitCommand: []string{"/app/counter"}, AppDir: app, StorageMode: "write-through"}}
		c.DurableObjects.AppRoots = []string{app}
	})
	t.Cleanup(func() {
		req, _ := http.NewRequest(http.MethodDelete, d.URL+"/v1/objects/wcounter/s1", nil)
		req.Header.Set("x-api-key", d.AdminKey)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	})
	var rows []map[string]any
	for i := range 30 {
		rows = append(rows, map[string]any{"row": i})
	}
	put := func(key string, value any) {
		apiJSON(t, d, d.AdminKey, "POST", "/v1/objects/wcounter/s1/call", map[string]any{"method": "put", "args": map[string]any{"key": key, "value": value}}, nil)
	}
	put("short", map[string]any{"a": 1})
	put("rows", rows)
	put("html", "<script>alert(1)</script>")

	b := newBrowser(t, d)
	b.login(d.AdminKey)
	resp, body := b.do(http.MethodGet, "/console/objects/wcounter/s1", nil, nil)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("object page: %d\n%s", resp.StatusCode, body)
	}
	for _, want := range []string{
		// Short: shown whole, pretty.
		"<td class=\"mono\">short</td><td><pre>{\n  &#34;a&#34;: 1\n}</pre></td>",
		// Long: folded to its first lines, all 92 behind.
		"<td class=\"mono\">rows</td><td><details class=\"fold\"><summary><code class=\"head\">[\n  {\n    &#34;row&#34;: 0\n  },",
		"show all 92 lines (321 bytes)",
		"    &#34;row&#34;: 29\n  }\n]</pre></details>",
		// As written, and escaped: never markup.
		"<pre>&#34;&lt;script&gt;alert(1)&lt;/script&gt;&#34;</pre>",
		"ObjectCreated",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the object page lacks %q", want)
		}
	}
	if strings.Contains(body, "<script>alert") {
		t.Error("a value is not escaped")
	}
	if t.Failed() {
		t.Fatal(body)
	}
	_, body = b.do(http.MethodGet, "/console/audit?subject=wcounter/s1", nil, nil)
	if !strings.Contains(body, "Oldest first") || !strings.Contains(body, "ObjectCreated") {
		t.Fatalf("audit log:\n%s", body)
	}

	o := newBrowser(t, d)
	o.login(otherTenantKey(t, d))
	if resp, body := o.do(http.MethodGet, "/console/objects/wcounter/s1", nil, nil); resp.StatusCode != http.StatusNotFound || strings.Contains(body, "row") {
		t.Fatalf("another tenant's object: %d", resp.StatusCode)
	}
	for _, path := range []string{"/console/objects", "/console/audit", "/console/audit?subject=wcounter/s1"} {
		if _, body := o.do(http.MethodGet, path, nil, nil); strings.Contains(body, "wcounter/s1</") || strings.Contains(body, "ObjectCreated") {
			t.Fatalf("another tenant sees the object on %s", path)
		}
	}
}

// TestObjectListPages: the objects list's next page continues where the
// first ended — the API's cursor is the last object's class/id, and a
// link that sent only its id was refused by the API — and keeps the
// list's filter.
func TestObjectListPages(t *testing.T) {
	console.SetObjectsPerPage(t, 2)
	app := counterApp(t)
	d := daemontest.Start(t, func(c *config.Config) {
		c.Objects = []config.ObjectClassConfig{{Class: "wcounter", InitCommand: []string{"/app/counter"}, AppDir: app, StorageMode: "write-through"}}
		c.DurableObjects.AppRoots = []string{app}
	})
	ids := []string{"p1", "p2", "p3"}
	t.Cleanup(func() {
		for _, id := range ids {
			req, _ := http.NewRequest(http.MethodDelete, d.URL+"/v1/objects/wcounter/"+id, nil)
			req.Header.Set("x-api-key", d.AdminKey)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}
	})
	for _, id := range ids {
		apiJSON(t, d, d.AdminKey, "POST", "/v1/objects/wcounter/"+id+"/call", map[string]any{"method": "increment"}, nil)
	}
	b := newBrowser(t, d)
	b.login(d.AdminKey)
	next := regexp.MustCompile(`<a href="(/console/objects\?[^"]+)">More objects</a>`)
	listed := func(body string) (out []string) {
		for _, id := range ids {
			if strings.Contains(body, `href="/console/objects/wcounter/`+id+`"`) {
				out = append(out, id)
			}
		}
		return out
	}
	resp, body := b.do(http.MethodGet, "/console/objects?class=wcounter", nil, nil)
	m := next.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || m == nil || fmt.Sprint(listed(body)) != "[p1 p2]" {
		t.Fatalf("the first page: %d, objects %v, next %v\n%s", resp.StatusCode, listed(body), m, body)
	}
	link := html.UnescapeString(m[1])
	if u, _ := url.Parse(link); u.Query().Get("class") != "wcounter" || u.Query().Get("after") != "wcounter/p2" {
		t.Fatalf("the next page's link %s: want after=wcounter/p2 and the class kept", link)
	}
	resp, body = b.do(http.MethodGet, link, nil, nil)
	if resp.StatusCode != http.StatusOK || fmt.Sprint(listed(body)) != "[p3]" || next.MatchString(body) {
		t.Fatalf("the second page (%s): %d, objects %v\n%s", link, resp.StatusCode, listed(body), body)
	}
}
