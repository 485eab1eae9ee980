package agentkernel_test

import (
	"context"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// TestHostNetworkIsTheOperatorsDecision: the host's network reaches the
// daemon's API on loopback and whatever else the host reaches, so a tenant
// may not ask for it — neither on a sandbox nor through an environment —
// unless agentkernel.toml allows it.
func TestHostNetworkIsTheOperatorsDecision(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	admin := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	tn, err := admin.Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: "netless"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := admin.Keys.Create(ctx, agentkernel.KeyCreateParams{Name: "t", TenantID: tn.ID})
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{k.Secret, d.AdminKey} {
		code, body := call(t, "POST", d.URL+"/v1/sandboxes", key, `{"network":"host"}`, "Content-Type", "application/json")
		if typ, msg := errType(body); code != 403 || typ != "permission_error" || !strings.Contains(msg, `"network"`) || !strings.Contains(msg, "allow_host_network") {
			t.Fatalf("sandbox with the host's network: %d %v", code, body)
		}
		code, body = call(t, "POST", d.URL+"/v1/environments", key, `{"name":"e","metadata":{"agentkernel.network":"host"}}`,
			"Content-Type", "application/json", "anthropic-beta", "managed-agents-2026-04-01")
		if typ, msg := errType(body); code != 400 || typ != "invalid_request_error" || !strings.Contains(msg, "metadata.agentkernel.network") || !strings.Contains(msg, "allow_host_network") {
			t.Fatalf("environment with the host's network: %d %v", code, body)
		}
	}
	if list, err := admin.Sandboxes.List(ctx, ""); err != nil || len(list) != 0 {
		t.Fatalf("a refused create left sandboxes: %v %v", list, err)
	}

	// The operator allows it: the sandbox sees the host's interfaces.
	open := daemontest.Start(t, func(c *config.Config) { c.Sandbox.AllowHostNetwork = true })
	oc := agentkernel.New(agentkernel.WithBaseURL(open.URL), agentkernel.WithAPIKey(open.AdminKey))
	sb, err := oc.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{Network: "host"})
	if err != nil {
		t.Fatal(err)
	}
	defer oc.Sandboxes.Delete(ctx, sb.ID)
	// /proc/net/dev: two header lines and one line per interface.
	res, err := oc.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: "wc -l < /proc/net/dev"})
	if err != nil || strings.TrimSpace(res.Stdout) == "3" {
		t.Fatalf("an allowed host-network sandbox sees only lo: %+v %v", res, err)
	}
}
