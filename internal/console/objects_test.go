package console_test

import (
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/agentkernel/agentkernel/internal/config"
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
