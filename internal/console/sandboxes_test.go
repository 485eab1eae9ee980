package console_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// The sandbox pages' bad paths: another tenant's sandbox, a file path the
// API refuses, a lifecycle POST without its token.
func TestSandboxPagesRefuse(t *testing.T) {
	d := daemontest.Start(t)
	var sb struct{ ID string }
	apiJSON(t, d, d.AdminKey, "POST", "/v1/sandboxes", map[string]any{}, &sb)
	b := newBrowser(t, d)
	b.login(d.AdminKey)

	// A path the API refuses shows the API's reason, and no file.
	resp, body := b.do(http.MethodGet, "/console/sandboxes/"+sb.ID+"/files/workspace/a%5Cb", nil, nil)
	if resp.StatusCode != http.StatusBadRequest || !strings.Contains(body, "backslash") {
		t.Fatalf("a backslash path: %d\n%s", resp.StatusCode, body)
	}
	resp, body = b.do(http.MethodGet, "/console/sandboxes/"+sb.ID+"/files/workspace/missing.txt", nil, nil)
	if resp.StatusCode != http.StatusNotFound {
		t.Fatalf("a missing file: %d\n%s", resp.StatusCode, body)
	}

	// Stop without the token changes nothing; with it, the sandbox stops.
	if resp, _ := b.do(http.MethodPost, "/console/sandboxes/"+sb.ID+"/stop", url.Values{}, nil); resp.StatusCode != http.StatusForbidden {
		t.Fatalf("stop without a token: %d", resp.StatusCode)
	}
	var got struct{ State string }
	apiJSON(t, d, d.AdminKey, "GET", "/v1/sandboxes/"+sb.ID, nil, &got)
	if got.State != "active" {
		t.Fatalf("after a refused stop the sandbox is %s", got.State)
	}
	tok := b.csrf("/console/sandboxes/" + sb.ID)
	if resp, body := b.do(http.MethodPost, "/console/sandboxes/"+sb.ID+"/stop", url.Values{"csrf": {tok}}, nil); resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("stop: %d %s", resp.StatusCode, body)
	}
	apiJSON(t, d, d.AdminKey, "GET", "/v1/sandboxes/"+sb.ID, nil, &got)
	if got.State != "cold" && got.State != "stopping" {
		t.Fatalf("after stop the sandbox is %s", got.State)
	}

	// Another tenant sees nothing of it.
	key := otherTenantKey(t, d)
	o := newBrowser(t, d)
	o.login(key)
	for _, path := range []string{"/console/sandboxes/" + sb.ID, "/console/sandboxes/" + sb.ID + "/files/workspace"} {
		if resp, _ := o.do(http.MethodGet, path, nil, nil); resp.StatusCode != http.StatusNotFound {
			t.Fatalf("another tenant's %s: %d", path, resp.StatusCode)
		}
	}
	if _, body := o.do(http.MethodGet, "/console/sandboxes", nil, nil); strings.Contains(body, sb.ID) {
		t.Fatal("another tenant's sandbox is listed")
	}
	otok := o.csrf("/console/sandboxes")
	if resp, _ := o.do(http.MethodPost, "/console/sandboxes/"+sb.ID+"/exec", url.Values{"csrf": {otok}, "command": {"true"}}, nil); resp.StatusCode != http.StatusNotFound {
		t.Fatalf("exec in another tenant's sandbox: %d", resp.StatusCode)
	}
}
