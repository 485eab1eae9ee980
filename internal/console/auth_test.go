package console_test

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// The console's door: login, the cookie that holds the key, CSRF and
// same-origin checks on every POST, and tenant scoping through the API.

// apiJSON calls the daemon's API with key and decodes the answer.
func apiJSON(t *testing.T, d *daemontest.Daemon, key, method, path string, body, out any) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, d.URL+path, rd)
	req.Header.Set("x-api-key", key)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode/100 != 2 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatal(err)
		}
	}
}

// browser is an HTTP client with a cookie jar that sends what a browser
// sends with a form of the console's own page.
type browser struct {
	t    *testing.T
	base string
	c    *http.Client
}

func newBrowser(t *testing.T, d *daemontest.Daemon) *browser {
	jar, _ := cookiejar.New(nil)
	return &browser{t: t, base: d.URL, c: &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error {
		return http.ErrUseLastResponse
	}}}
}

func (b *browser) do(method, path string, form url.Values, hdr map[string]string) (*http.Response, string) {
	b.t.Helper()
	var rd io.Reader
	if form != nil {
		rd = strings.NewReader(form.Encode())
	}
	req, _ := http.NewRequest(method, b.base+path, rd)
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if method == http.MethodPost {
		req.Header.Set("Origin", b.base)
		req.Header.Set("Sec-Fetch-Site", "same-origin")
	}
	for k, v := range hdr {
		if v == "" {
			req.Header.Del(k)
		} else {
			req.Header.Set(k, v)
		}
	}
	resp, err := b.c.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp, string(body)
}

func (b *browser) login(key string) *http.Response {
	b.t.Helper()
	resp, _ := b.do(http.MethodPost, "/console/login", url.Values{"key": {key}, "next": {"/console/sessions"}}, nil)
	return resp
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf is the CSRF token of a console page.
func (b *browser) csrf(path string) string {
	b.t.Helper()
	_, body := b.do(http.MethodGet, path, nil, nil)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		b.t.Fatalf("no CSRF token on %s:\n%s", path, body)
	}
	return m[1]
}

// otherTenantKey makes a second tenant and returns a key of it.
func otherTenantKey(t *testing.T, d *daemontest.Daemon) string {
	t.Helper()
	var tenant struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/tenants", map[string]any{"name": "other"}, &tenant)
	var key struct {
		Secret string `json:"secret"`
	}
	apiJSON(t, d, d.AdminKey, "POST", "/v1/keys", map[string]any{"name": "other", "tenant_id": tenant.ID}, &key)
	return key.Secret
}

// newSession makes an agent, an environment and a session with key.
func newSession(t *testing.T, d *daemontest.Daemon, key string) string {
	t.Helper()
	var agent, env, s struct{ ID string }
	apiJSON(t, d, key, "POST", "/v1/agents", map[string]any{"name": "console", "model": "claude-sonnet-4-5", "tools": []any{map[string]any{"type": "agent_toolset_20260401"}}}, &agent)
	apiJSON(t, d, key, "POST", "/v1/environments", map[string]any{"name": "console"}, &env)
	apiJSON(t, d, key, "POST", "/v1/sessions", map[string]any{"agent": agent.ID, "environment_id": env.ID}, &s)
	return s.ID
}

func TestLoginKeepsTheKeyInAStrictCookie(t *testing.T) {
	d := daemontest.Start(t)
	b := newBrowser(t, d)
	resp, body := b.do(http.MethodGet, "/console/sessions", nil, nil)
	if resp.StatusCode != http.StatusSeeOther || !strings.HasPrefix(resp.Header.Get("Location"), "/console/login") {
		t.Fatalf("logged out: %d %s %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	resp, _ = b.do(http.MethodGet, "/console/login", nil, nil)
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "script-src 'self'") || !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Fatalf("Content-Security-Policy %q", csp)
	}
	resp = b.login(d.AdminKey)
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/console/sessions" {
		t.Fatalf("login: %d %s", resp.StatusCode, resp.Header.Get("Location"))
	}
	var ck *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "agentkernel_console" {
			ck = c
		}
	}
	if ck == nil || !ck.HttpOnly || ck.SameSite != http.SameSiteStrictMode || ck.Path != "/console" {
		t.Fatalf("cookie %+v: want HttpOnly, SameSite=Strict, Path=/console", ck)
	}
	if resp, body := b.do(http.MethodGet, "/console/sessions", nil, nil); resp.StatusCode != http.StatusOK || !strings.Contains(body, "<h1>Sessions</h1>") {
		t.Fatalf("sessions: %d\n%s", resp.StatusCode, body)
	}
	// A login next= outside the console goes to the console instead.
	resp, _ = b.do(http.MethodPost, "/console/login", url.Values{"key": {d.AdminKey}, "next": {"//evil.example/"}}, nil)
	if loc := resp.Header.Get("Location"); loc != "/console/sessions" {
		t.Fatalf("login with an outside next went to %q", loc)
	}
	// Logged out, the cookie is gone and pages ask to log in again.
	tok := b.csrf("/console/sessions")
	if resp, _ := b.do(http.MethodPost, "/console/logout", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("logout: %d", resp.StatusCode)
	}
	if resp, _ := b.do(http.MethodGet, "/console/sessions", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("after logout: %d", resp.StatusCode)
	}
}

func TestLoginRefusesBadAndEnvironmentKeys(t *testing.T) {
	d := daemontest.Start(t)
	b := newBrowser(t, d)
	if resp := b.login("ak_not_a_key"); resp.StatusCode != http.StatusUnauthorized || len(resp.Cookies()) != 0 {
		t.Fatalf("bad key: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	var env struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/environments", map[string]any{"name": "w", "config": map[string]any{"type": "self_hosted"}}, &env)
	var key struct {
		Secret string `json:"secret"`
	}
	apiJSON(t, d, d.AdminKey, "POST", "/v1/keys", map[string]any{"name": "worker", "environment_id": env.ID}, &key)
	if key.Secret == "" {
		t.Fatal("no environment key secret")
	}
	if resp := b.login(key.Secret); resp.StatusCode != http.StatusForbidden || len(resp.Cookies()) != 0 {
		t.Fatalf("environment key: %d, cookies %v", resp.StatusCode, resp.Cookies())
	}
	// A key revoked after login logs the console out.
	var k2 struct {
		ID     string `json:"id"`
		Secret string `json:"secret"`
	}
	var me struct {
		Data []struct {
			TenantID string `json:"tenant_id"`
		} `json:"data"`
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/keys", nil, &me)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/keys", map[string]any{"name": "soon revoked", "tenant_id": me.Data[0].TenantID}, &k2)
	if resp := b.login(k2.Secret); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("login: %d", resp.StatusCode)
	}
	apiJSON(t, d, d.AdminKey, "DELETE", "/v1/keys/"+k2.ID, nil, nil)
	if resp, _ := b.do(http.MethodGet, "/console/sessions", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoked key still logged in: %d", resp.StatusCode)
	}
}

func TestPostsNeedTheCSRFTokenAndTheSameOrigin(t *testing.T) {
	d := daemontest.Start(t)
	sid := newSession(t, d, d.AdminKey)
	b := newBrowser(t, d)
	b.login(d.AdminKey)
	page := "/console/sessions/" + sid
	tok := b.csrf(page)
	msg := func(text string) url.Values { return url.Values{"csrf": {tok}, "text": {text}} }
	for name, tc := range map[string]struct {
		form url.Values
		hdr  map[string]string
	}{
		"no token":     {url.Values{"text": {"no token"}}, nil},
		"wrong token":  {url.Values{"csrf": {strings.Repeat("0", len(tok))}, "text": {"wrong token"}}, nil},
		"cross-site":   {msg("cross-site"), map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.example"}},
		"other origin": {msg("other origin"), map[string]string{"Sec-Fetch-Site": "", "Origin": "http://evil.example"}},
		"no origin":    {msg("no origin"), map[string]string{"Sec-Fetch-Site": "", "Origin": ""}},
	} {
		if resp, body := b.do(http.MethodPost, page+"/message", tc.form, tc.hdr); resp.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d %s", name, resp.StatusCode, body)
		}
	}
	var evs struct{ Data []json.RawMessage }
	apiJSON(t, d, d.AdminKey, "GET", "/v1/sessions/"+sid+"/events", nil, &evs)
	if len(evs.Data) != 0 {
		t.Fatalf("a refused POST reached the session: %d events", len(evs.Data))
	}
	// With the token, from the page: the message is sent.
	if resp, body := b.do(http.MethodPost, page+"/interrupt", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("interrupt: %d %s", resp.StatusCode, body)
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/sessions/"+sid+"/events", nil, &evs)
	if len(evs.Data) != 1 || !strings.Contains(string(evs.Data[0]), `"user.interrupt"`) {
		t.Fatalf("events after the console's interrupt: %s", evs.Data)
	}
}

func TestAnotherTenantsSessionIsNotFound(t *testing.T) {
	d := daemontest.Start(t)
	sid := newSession(t, d, d.AdminKey)
	key := otherTenantKey(t, d)
	b := newBrowser(t, d)
	b.login(key)
	resp, body := b.do(http.MethodGet, "/console/sessions/"+sid, nil, nil)
	if resp.StatusCode != http.StatusNotFound || strings.Contains(body, sid+"/message") {
		t.Fatalf("another tenant's session: %d\n%s", resp.StatusCode, body)
	}
	if _, body := b.do(http.MethodGet, "/console/sessions", nil, nil); strings.Contains(body, sid) {
		t.Fatal("another tenant's session is listed")
	}
	tok := b.csrf("/console/sessions")
	if resp, _ := b.do(http.MethodPost, "/console/sessions/"+sid+"/interrupt", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("interrupting another tenant's session: %d", resp.StatusCode)
	}
}

// TestForkAndRewindFromTheSessionPage: the page's fork opens a new session
// with the source's events; its rewind takes the session back to an event.
func TestForkAndRewindFromTheSessionPage(t *testing.T) {
	d := daemontest.Start(t)
	sid := newSession(t, d, d.AdminKey)
	// Two interrupts: events the fork and the rewind can point at.
	for range 2 {
		apiJSON(t, d, d.AdminKey, "POST", "/v1/sessions/"+sid+"/events", map[string]any{"events": []any{map[string]any{"type": "user.interrupt"}}}, nil)
	}
	var evs struct {
		Data []struct{ ID string }
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/sessions/"+sid+"/events", nil, &evs)
	if len(evs.Data) != 2 {
		t.Fatalf("%d events", len(evs.Data))
	}
	b := newBrowser(t, d)
	b.login(d.AdminKey)
	page := "/console/sessions/" + sid
	tok := b.csrf(page)
	resp, body := b.do(http.MethodPost, page+"/fork", url.Values{"csrf": {tok}, "event_id": {evs.Data[0].ID}}, nil)
	fork, ok := strings.CutPrefix(resp.Header.Get("Location"), "/console/sessions/")
	if resp.StatusCode != http.StatusSeeOther || !ok || fork == sid {
		t.Fatalf("fork: %d %s %s", resp.StatusCode, resp.Header.Get("Location"), body)
	}
	var forked struct {
		Data []struct{ ID string }
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/sessions/"+fork+"/events", nil, &forked)
	if len(forked.Data) == 0 || forked.Data[0].ID != evs.Data[0].ID {
		t.Fatalf("the fork's events: %+v", forked.Data)
	}
	if resp, body := b.do(http.MethodPost, page+"/rewind", url.Values{"csrf": {tok}, "event_id": {evs.Data[0].ID}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("rewind: %d %s", resp.StatusCode, body)
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/sessions/"+sid+"/events", nil, &evs)
	if len(evs.Data) != 1 {
		t.Fatalf("after the rewind the session has %d events; want 1", len(evs.Data))
	}
	if resp, _ := b.do(http.MethodPost, page+"/rewind", url.Values{"csrf": {tok}, "event_id": {"sevt_nope"}}, nil); resp.StatusCode/100 != 4 {
		t.Fatalf("rewind to an unknown event: %d", resp.StatusCode)
	}
}
