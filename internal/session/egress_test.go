package session

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/egress"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

type fakeCreds map[string][]egress.Credential // vault id → credentials

func (f fakeCreds) EnvCredentials(_ context.Context, tenantID string, vaultIDs []string) ([]egress.Credential, error) {
	var out []egress.Credential
	for _, id := range vaultIDs {
		out = append(out, f[id]...)
	}
	return out, nil
}

// The policy comes from durable facts: the session that names the
// sandbox as its own, its environment's networking, its agent's MCP
// servers and its vaults. A sandbox no session owns gets none.
func TestPoliciesResolveFromTheOwningSession(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	mustEnv := func(id, networking string) {
		t.Helper()
		if _, err := st.CreateEnvironment(ctx, &store.Environment{ID: id, TenantID: "t1",
			Doc: json.RawMessage(`{"name":"e","config":{"type":"cloud","networking":` + networking + `}}`)}); err != nil {
			t.Fatal(err)
		}
	}
	mustEnv("env_lim", `{"type":"limited","allowed_hosts":["api.example.com","127.0.0.1:9000"],"allow_mcp_servers":true,"allow_package_managers":false}`)
	mustEnv("env_open", `{"type":"unrestricted"}`)
	mustSandbox := func(id, tenant, session string) {
		t.Helper()
		md := map[string]string{}
		if session != "" {
			md["agentkernel.session"] = session
		}
		if _, err := st.CreateSandbox(ctx, &store.Sandbox{ID: id, TenantID: tenant, Driver: "process", Network: "egress", Metadata: md}); err != nil {
			t.Fatal(err)
		}
	}
	mustSession := func(id, env, sandboxID, doc string) {
		t.Helper()
		if _, err := st.CreateManagedSession(ctx, &store.ManagedSession{ID: id, TenantID: "t1", AgentID: "agent_1", AgentVersion: 1,
			EnvironmentID: env, SandboxID: sandboxID, Doc: json.RawMessage(doc)}); err != nil {
			t.Fatal(err)
		}
	}
	mustSandbox("sbx_lim", "t1", "sesn_lim")
	mustSession("sesn_lim", "env_lim", "sbx_lim", `{"vault_ids":["vlt_a"],"agent":{"mcp_servers":[{"type":"url","name":"m","url":"https://mcp.example.com/mcp"}]}}`)
	mustSandbox("sbx_open", "t1", "sesn_open")
	mustSession("sesn_open", "env_open", "sbx_open", `{}`)
	mustSandbox("sbx_raw", "t1", "")
	mustSandbox("sbx_claim", "t1", "sesn_lim") // claims a session that does not name it
	mustSandbox("sbx_other", "t2", "sesn_open")

	cred := egress.Credential{ID: "vcrd_1", EnvVar: "TOKEN", Placeholder: egress.Placeholder("vcrd_1"), Value: "v", Header: true}
	p := &Policies{Store: st, Vaults: fakeCreds{"vlt_a": {cred}}}

	lim, err := p.Resolve(ctx, "sbx_lim")
	if err != nil {
		t.Fatal(err)
	}
	if lim.TenantID != "t1" || lim.SessionID != "sesn_lim" || lim.Unrestricted {
		t.Fatalf("limited policy: %+v", lim)
	}
	for _, c := range []struct {
		host string
		port int
		want bool
	}{{"api.example.com", 443, true}, {"127.0.0.1", 9000, true}, {"mcp.example.com", 443, true}, {"pypi.org", 443, false}, {"evil.example.com", 443, false}} {
		if got := lim.Allows(c.host, c.port); got != c.want {
			t.Errorf("limited Allows(%s:%d) = %v, want %v", c.host, c.port, got, c.want)
		}
	}
	if len(lim.Credentials) != 1 || lim.Credentials[0].ID != "vcrd_1" {
		t.Errorf("credentials %v, want vcrd_1 from vault vlt_a", lim.Credentials)
	}
	if !strings.Contains(lim.Describe, "env_lim") || !strings.Contains(lim.Describe, "api.example.com") {
		t.Errorf("Describe %q names neither the environment nor its hosts", lim.Describe)
	}

	open, err := p.Resolve(ctx, "sbx_open")
	if err != nil || !open.Unrestricted || !open.Allows("pypi.org", 443) || open.Allows("127.0.0.1", 9000) {
		t.Fatalf("unrestricted policy: %+v %v", open, err)
	}
	for _, id := range []string{"sbx_raw", "sbx_claim", "sbx_other"} {
		if pol, err := p.Resolve(ctx, id); !errors.Is(err, ErrNoPolicy) {
			t.Errorf("Resolve(%s) = %+v, %v; want ErrNoPolicy", id, pol, err)
		}
	}
	if _, err := p.Resolve(ctx, "sbx_unknown"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Resolve(unknown) = %v, want ErrNotFound", err)
	}
}
