package agentkernel_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(testenv.Main(m)) }

// call sends a raw request and decodes the envelope, so tests see exactly
// what any HTTP client sees.
func call(t *testing.T, method, url, key, body string, hdr ...string) (int, map[string]any) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, url, rd)
	if err != nil {
		t.Fatal(err)
	}
	if key != "" {
		req.Header.Set("x-api-key", key)
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var m map[string]any
	if len(b) > 0 && b[0] == '{' {
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s %s: body is not JSON: %q", method, url, b)
		}
	}
	if resp.StatusCode >= 400 {
		if m["type"] != "error" {
			t.Fatalf("%s %s: %d without the error envelope: %s", method, url, resp.StatusCode, b)
		}
		if resp.Header.Get("request-id") == "" {
			t.Fatalf("%s %s: no request-id header", method, url)
		}
	}
	return resp.StatusCode, m
}

func errType(m map[string]any) (string, string) {
	e, _ := m["error"].(map[string]any)
	typ, _ := e["type"].(string)
	msg, _ := e["message"].(string)
	return typ, msg
}

func TestHealthzWithoutKeyAndAuthRequired(t *testing.T) {
	d := daemontest.Start(t)
	code, body := call(t, "GET", d.URL+"/healthz", "", "")
	if code != 200 || body["status"] != "ok" || body["store"] != "sqlite" {
		t.Fatalf("healthz: %d %v", code, body)
	}
	code, body = call(t, "GET", d.URL+"/v1/keys", "", "")
	if typ, _ := errType(body); code != 401 || typ != "authentication_error" {
		t.Fatalf("no key: %d %v", code, body)
	}
	code, _ = call(t, "GET", d.URL+"/v1/keys", "ak_wrong", "")
	if code != 401 {
		t.Fatalf("wrong key: %d", code)
	}
	code, _ = call(t, "GET", d.URL+"/v1/keys", "", "", "Authorization", "Bearer "+d.AdminKey)
	if code != 200 {
		t.Fatalf("bearer admin key: %d", code)
	}
	code, _ = call(t, "GET", d.URL+"/v1/keys", d.AdminKey, "")
	if code != 200 {
		t.Fatalf("x-api-key admin key: %d", code)
	}
	code, body = call(t, "GET", d.URL+"/v1/nothing-here", d.AdminKey, "")
	if typ, _ := errType(body); code != 404 || typ != "not_found_error" {
		t.Fatalf("unknown route: %d %v", code, body)
	}
}

func TestAdminKeyFileMode(t *testing.T) {
	d := daemontest.Start(t)
	fi, err := os.Stat(filepath.Join(d.Config.Home, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("admin.key mode = %v, want 0600", fi.Mode().Perm())
	}
}

func TestSDKKeysAndTenants(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	admin := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))

	h, err := admin.Health(ctx)
	if err != nil || h.Status != "ok" {
		t.Fatalf("health: %v %v", h, err)
	}
	acme, err := admin.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: "acme"})
	if err != nil {
		t.Fatal(err)
	}
	globex, err := admin.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: "globex"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: "acme"}); !isStatus(err, 409) {
		t.Fatalf("duplicate tenant: %v", err)
	}
	acmeKey, err := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "ci", TenantID: acme.ID})
	if err != nil || !strings.HasPrefix(acmeKey.Secret, "ak_") || acmeKey.TenantID != acme.ID {
		t.Fatalf("create key: %+v %v", acmeKey, err)
	}
	globexKey, err := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "ci", TenantID: globex.ID})
	if err != nil {
		t.Fatal(err)
	}

	// A tenant key sees its own tenant's keys and nothing else: another
	// tenant's id answers 404, exactly like an unknown id.
	acmeClient := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(acmeKey.Secret))
	keys, err := acmeClient.Keys.List(ctx)
	if err != nil || len(keys) != 1 || keys[0].ID != acmeKey.ID || keys[0].Secret != "" {
		t.Fatalf("acme list: %+v %v", keys, err)
	}
	if _, err := acmeClient.Keys.Get(ctx, globexKey.ID); !agentkernel.IsNotFound(err) {
		t.Fatalf("other tenant's key: %v", err)
	}
	if _, err := acmeClient.Keys.Get(ctx, "key_doesnotexist"); !agentkernel.IsNotFound(err) {
		t.Fatalf("unknown key: %v", err)
	}
	// Admin-only endpoints refuse a tenant key.
	if _, err := acmeClient.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "x"}); !isStatus(err, 403) {
		t.Fatalf("tenant key creating keys: %v", err)
	}
	if _, err := acmeClient.Tenants.List(ctx); !isStatus(err, 403) {
		t.Fatalf("tenant key listing tenants: %v", err)
	}
	all, err := admin.Keys.List(ctx)
	if err != nil || len(all) != 3 {
		t.Fatalf("admin list: %d %v", len(all), err)
	}

	// Revocation takes effect on the next request.
	if _, err := admin.Keys.Revoke(ctx, acmeKey.ID); err != nil {
		t.Fatal(err)
	}
	if _, err := acmeClient.Keys.List(ctx); !isStatus(err, 401) {
		t.Fatalf("revoked key: %v", err)
	}
	// Bad input names the field.
	if _, err := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: ""}); !isStatus(err, 400) || !strings.Contains(err.Error(), `"name"`) {
		t.Fatalf("missing name: %v", err)
	}
	if _, err := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "x", TenantID: "tnt_nope"}); !isStatus(err, 422) || !strings.Contains(err.Error(), "tenant_id") {
		t.Fatalf("unknown tenant: %v", err)
	}
}

func TestBadRequestBodies(t *testing.T) {
	d := daemontest.Start(t)
	u := d.URL + "/v1/tenants"
	cases := []struct {
		name, body string
		code       int
		want       string
	}{
		{"malformed", `{"name":`, 400, "malformed JSON"},
		{"not an object", `[1,2]`, 400, "expected"},
		{"unknown field", `{"name":"a","color":"red"}`, 400, `"color"`},
		{"wrong type", `{"name":5}`, 400, `"name"`},
		{"trailing data", `{"name":"a"} {"name":"b"}`, 400, "single JSON object"},
		{"empty", ``, 400, "empty"},
		{"bad name", `{"name":"Bad Name!"}`, 422, `"name"`},
		{"oversized", `{"name":"` + strings.Repeat("a", 2<<20) + `"}`, 413, "2097152 bytes"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			code, body := call(t, "POST", u, d.AdminKey, c.body, "Content-Type", "application/json")
			_, msg := errType(body)
			if code != c.code || !strings.Contains(msg, c.want) {
				t.Fatalf("got %d %q, want %d containing %q", code, msg, c.code, c.want)
			}
		})
	}
	code, _ := call(t, "POST", u, d.AdminKey, `{"name":"a"}`, "Content-Type", "text/plain")
	if code != 415 {
		t.Fatalf("wrong content type: %d", code)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	d := daemontest.Start(t)
	call(t, "GET", d.URL+"/healthz", "", "")
	resp, err := http.Get(d.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, want := range []string{`agentkernel_http_requests_total{code="200",method="GET",route="GET /healthz"}`, "go_goroutines"} {
		if !strings.Contains(string(b), want) {
			t.Fatalf("metrics lack %s", want)
		}
	}
}

func TestSDKDefaultsFromEnvironmentAndHome(t *testing.T) {
	d := daemontest.Start(t)
	t.Setenv("AGENTKERNEL_URL", d.URL)
	t.Setenv("AGENTKERNEL_API_KEY", "")
	t.Setenv("AGENTKERNEL_HOME", d.Config.Home)
	c := agentkernel.New() // the admin key comes from $AGENTKERNEL_HOME/admin.key
	if _, err := c.Keys.List(context.Background()); err != nil {
		t.Fatalf("default client: %v", err)
	}
	t.Setenv("AGENTKERNEL_API_KEY", "ak_bogus")
	if _, err := agentkernel.New().Keys.List(context.Background()); !isStatus(err, 401) {
		t.Fatalf("env key must win over the file: %v", err)
	}
	// Options win over the environment.
	c = agentkernel.New(agentkernel.WithAPIKey(d.AdminKey))
	if _, err := c.Keys.List(context.Background()); err != nil {
		t.Fatalf("option key: %v", err)
	}
}

func isStatus(err error, code int) bool {
	var e *agentkernel.Error
	return errors.As(err, &e) && e.StatusCode == code
}

// TestUnknownQueryParametersAreRefused: a query parameter an endpoint does
// not read is a 400 naming it, so a misspelt filter is an error and not a
// listing that silently ignores it.
func TestUnknownQueryParametersAreRefused(t *testing.T) {
	d := daemontest.Start(t)
	ctx := context.Background()
	admin := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := admin.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	tn, err := admin.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: "q"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "q", TenantID: tn.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{
		"/v1/sandboxes?stat=active", "/v1/sandboxes/" + sb.ID + "?verbose=1", "/v1/sandboxes/" + sb.ID + "/backups?limit=5",
		"/v1/sandboxes/" + sb.ID + "/processes?all=1", "/v1/sandboxes/" + sb.ID + "/activity?x=1",
		"/v1/objects?clas=counter", "/v1/objects/definitions?x=1", "/v1/audit?knd=ObjectCreated",
		"/v1/tenants?name=q", "/v1/keys?tenant=" + tn.ID, "/v1/tasks/tsk_x?x=1", "/v1/tickets/tkt_x?x=1",
	} {
		code, body := call(t, "GET", d.URL+p, d.AdminKey, "")
		if typ, msg := errType(body); code != 400 || typ != "invalid_request_error" || !strings.Contains(msg, "unknown query parameter") {
			t.Errorf("GET %s: %d %v, want a 400 naming the parameter", p, code, body)
		}
	}
	// A tenant's key lists its own keys; asking for another tenant's is an
	// error, not a listing of its own under another name.
	if code, body := call(t, "GET", d.URL+"/v1/keys?tenant_id=tnt_other", k.Secret, ""); code != 400 {
		t.Errorf("tenant key listing another tenant's keys: %d %v", code, body)
	}
	if code, body := call(t, "GET", d.URL+"/v1/keys?tenant_id="+tn.ID, k.Secret, ""); code != 200 {
		t.Errorf("tenant key listing its own keys: %d %v", code, body)
	}
}
