package console_test

import (
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

var secretShown = regexp.MustCompile(`<pre class="file" id="secret">([^<]+)</pre>`)

// TestKeysAndTenants: an admin makes a tenant and a key of it through the
// console (the secret shown once, and it works); that tenant's key sees no
// tenants page and cannot revoke; the admin revokes the key.
func TestKeysAndTenants(t *testing.T) {
	d := daemontest.Start(t)
	admin := newBrowser(t, d)
	admin.login(d.AdminKey)
	tok := admin.csrf("/console/tenants")
	if resp, body := admin.do(http.MethodPost, "/console/tenants", url.Values{"csrf": {tok}, "name": {"acme"}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("make a tenant: %d %s", resp.StatusCode, body)
	}
	_, body := admin.do(http.MethodGet, "/console/tenants", nil, nil)
	m := regexp.MustCompile(`<td>acme</td><td class="mono">(tnt_[a-z0-9]+)</td>`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("the tenant is not listed:\n%s", body)
	}
	resp, body := admin.do(http.MethodPost, "/console/keys", url.Values{"csrf": {tok}, "name": {"acme-ci"}, "tenant_id": {m[1]}}, nil)
	sm := secretShown.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || sm == nil {
		t.Fatalf("make a key: %d\n%s", resp.StatusCode, body)
	}
	secret := sm[1]
	if _, body := admin.do(http.MethodGet, "/console/keys", nil, nil); strings.Contains(body, secret) || !strings.Contains(body, "acme-ci") {
		t.Fatal("the keys page shows the secret again, or not the key")
	}

	user := newBrowser(t, d)
	if resp := user.login(secret); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the new key does not log in: %d", resp.StatusCode)
	}
	if resp, body := user.do(http.MethodGet, "/console/tenants", nil, nil); resp.StatusCode != http.StatusForbidden || strings.Contains(body, "acme") {
		t.Fatalf("a tenant key on the tenants page: %d\n%s", resp.StatusCode, body)
	}
	if _, body := user.do(http.MethodGet, "/console/keys", nil, nil); strings.Contains(body, "/console/tenants\"") || strings.Contains(body, "Revoke") {
		t.Fatal("a tenant key sees the tenants link or a revoke button")
	}
	var keys struct {
		Data []struct{ ID, Name string }
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/keys", nil, &keys)
	id := ""
	for _, k := range keys.Data {
		if k.Name == "acme-ci" {
			id = k.ID
		}
	}
	utok := user.csrf("/console/keys")
	if resp, body := user.do(http.MethodPost, "/console/keys/"+id+"/revoke", url.Values{"csrf": {utok}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a tenant key revoking: %d\n%s", resp.StatusCode, body)
	}
	if resp, _ := admin.do(http.MethodPost, "/console/keys/"+id+"/revoke", url.Values{}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a revoke without its token: %d", resp.StatusCode)
	}
	if resp, body := admin.do(http.MethodPost, "/console/keys/"+id+"/revoke", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d %s", resp.StatusCode, body)
	}
	if resp, _ := user.do(http.MethodGet, "/console/keys", nil, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("the revoked key is still logged in: %d", resp.StatusCode)
	}

	p := newPage(t, d.URL)
	p.run("log in", chromedp.Navigate(d.URL+"/console/login"), chromedp.WaitVisible("#key"),
		chromedp.SendKeys("#key", d.AdminKey), chromedp.Submit("#key"), chromedp.WaitVisible("form.logout"))
	p.run("keys", chromedp.Navigate(d.URL+"/console/keys"), chromedp.WaitVisible("#k-name"))
	p.check("keys")
	p.run("tenants", chromedp.Navigate(d.URL+"/console/tenants"), chromedp.WaitVisible("#t-name"))
	p.check("tenants")
}

// TestTenantKeyManagesItsEnvironmentKeys: a tenant key makes an
// environment key for its self_hosted environment through the console
// (the secret shown once) and revokes it, as the API allows it; it is
// offered no revoke of tenant keys or of the key it logged in with. A
// revoke without the CSRF token is a 403 that changes nothing.
func TestTenantKeyManagesItsEnvironmentKeys(t *testing.T) {
	d := daemontest.Start(t)
	var tenant, loginKey struct{ ID, Secret string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/tenants", map[string]any{"name": "acme"}, &tenant)
	apiJSON(t, d, d.AdminKey, "POST", "/v1/keys", map[string]any{"name": "acme-login", "tenant_id": tenant.ID}, &loginKey)
	var sibling struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/keys", map[string]any{"name": "acme-ci", "tenant_id": tenant.ID}, &sibling)
	var env struct{ ID string }
	apiJSON(t, d, loginKey.Secret, "POST", "/v1/environments", map[string]any{"name": "workers", "config": map[string]any{"type": "self_hosted"}}, &env)

	b := newBrowser(t, d)
	b.login(loginKey.Secret)
	tok := b.csrf("/console/keys")
	resp, body := b.do(http.MethodPost, "/console/keys", url.Values{"csrf": {tok}, "name": {"worker"}, "environment_id": {env.ID}}, nil)
	sm := secretShown.FindStringSubmatch(body)
	if resp.StatusCode != http.StatusOK || sm == nil {
		t.Fatalf("make an environment key: %d\n%s", resp.StatusCode, body)
	}
	secret := sm[1]
	var keys struct {
		Data []struct {
			ID, Name  string
			RevokedAt *string `json:"revoked_at"`
		}
	}
	workerID := func() string {
		apiJSON(t, d, loginKey.Secret, "GET", "/v1/keys", nil, &keys)
		for _, k := range keys.Data {
			if k.Name == "worker" {
				return k.ID
			}
		}
		t.Fatal("the environment key is not listed by the API")
		return ""
	}
	id := workerID()
	_, body = b.do(http.MethodGet, "/console/keys", nil, nil)
	if strings.Contains(body, secret) {
		t.Fatal("the keys page shows the secret again")
	}
	for _, k := range []struct {
		id     string
		revoke bool
	}{{id, true}, {sibling.ID, false}, {loginKey.ID, false}} {
		if got := strings.Contains(body, `action="/console/keys/`+k.id+`/revoke"`); got != k.revoke {
			t.Errorf("key %s: revoke offered %v, want %v", k.id, got, k.revoke)
		}
	}
	if !strings.Contains(body, "active · this login") {
		t.Error("the login key is not marked")
	}
	if t.Failed() {
		t.Fatal(body)
	}

	// Without the token: refused, and the key still works.
	if resp, _ := b.do(http.MethodPost, "/console/keys/"+id+"/revoke", url.Values{}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a revoke without its token: %d", resp.StatusCode)
	}
	if resp, _ := b.do(http.MethodPost, "/console/keys/"+id+"/revoke", url.Values{"csrf": {strings.Repeat("0", len(tok))}}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("a revoke with a wrong token: %d", resp.StatusCode)
	}
	workerID()
	for _, k := range keys.Data {
		if k.ID == id && k.RevokedAt != nil {
			t.Fatal("a refused revoke revoked the key")
		}
	}
	if resp, body := b.do(http.MethodPost, "/console/keys/"+id+"/revoke", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("revoke: %d\n%s", resp.StatusCode, body)
	}
	workerID()
	for _, k := range keys.Data {
		if k.ID == id && k.RevokedAt == nil {
			t.Fatal("the revoke did not revoke the key")
		}
	}
	// A tenant key's revoke of a tenant key is the API's 403, shown.
	if resp, body := b.do(http.MethodPost, "/console/keys/"+sibling.ID+"/revoke", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(body, "environment keys only") {
		t.Fatalf("a tenant key revoking a tenant key: %d\n%s", resp.StatusCode, body)
	}
}
