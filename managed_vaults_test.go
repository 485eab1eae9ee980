package agentkernel_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/egress"
)

// lockedBuffer collects the daemon's log while it writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// seen keeps every raw answer the test got, to look for secrets in.
type seen struct{ raw []string }

func (s *seen) add(raws ...string) { s.raw = append(s.raw, raws...) }

func TestVaultsThroughTheSDK(t *testing.T) {
	ctx := context.Background()
	logs := &lockedBuffer{}
	d := daemontest.StartLogged(t, logs)
	c := sdkClient(d, d.AdminKey)
	var got seen
	secrets := []string{"sk-bearer-SECRET-1", "oauth-access-SECRET-2", "oauth-refresh-SECRET-3", "client-SECRET-4", "env-value-SECRET-5", "sk-bearer-SECRET-6"}

	// Vaults: create, get, update, list with paging, archive, include_archived.
	v, err := c.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "prod", Metadata: map[string]string{"team": "infra"}})
	if err != nil || v.Type != "vault" || !strings.HasPrefix(v.ID, "vlt_") || v.DisplayName != "prod" || v.Metadata["team"] != "infra" ||
		v.CreatedAt.IsZero() || !v.ArchivedAt.IsZero() {
		t.Fatalf("create vault: %v %v", v, err)
	}
	gv, err := c.Beta.Vaults.Get(ctx, v.ID, anthropic.BetaVaultGetParams{})
	if err != nil || gv.ID != v.ID || gv.DisplayName != "prod" {
		t.Fatalf("get vault: %v %v", gv, err)
	}
	uv, err := c.Beta.Vaults.Update(ctx, v.ID, anthropic.BetaVaultUpdateParams{DisplayName: anthropic.String("production"), Metadata: map[string]string{"env": "p"}})
	if err != nil || uv.DisplayName != "production" || uv.Metadata["team"] != "infra" || uv.Metadata["env"] != "p" {
		t.Fatalf("update vault: %v %v", uv, err)
	}
	var others []string
	for _, n := range []string{"b", "c", "d"} {
		o, err := c.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: n})
		if err != nil {
			t.Fatal(err)
		}
		others = append(others, o.ID)
	}
	first, err := c.Beta.Vaults.List(ctx, anthropic.BetaVaultListParams{Limit: anthropic.Int(2)})
	if err != nil || len(first.Data) != 2 || first.NextPage == "" {
		t.Fatalf("first page: %v %v", first, err)
	}
	countVaults := func(p anthropic.BetaVaultListParams) int {
		n, ids := 0, map[string]bool{}
		for x := range c.Beta.Vaults.ListAutoPaging(ctx, p).All() {
			if ids[x.ID] {
				t.Fatalf("vault %s listed twice", x.ID)
			}
			ids[x.ID] = true
			n++
		}
		return n
	}
	if n := countVaults(anthropic.BetaVaultListParams{Limit: anthropic.Int(2)}); n != 4 {
		t.Fatalf("listed %d vaults, want 4", n)
	}
	av, err := c.Beta.Vaults.Archive(ctx, others[0], anthropic.BetaVaultArchiveParams{})
	if err != nil || av.ArchivedAt.IsZero() {
		t.Fatalf("archive vault: %v %v", av, err)
	}
	if n := countVaults(anthropic.BetaVaultListParams{Limit: anthropic.Int(2)}); n != 3 {
		t.Fatalf("listed %d vaults without archived, want 3", n)
	}
	if n := countVaults(anthropic.BetaVaultListParams{Limit: anthropic.Int(2), IncludeArchived: anthropic.Bool(true)}); n != 4 {
		t.Fatalf("listed %d vaults with archived, want 4", n)
	}
	_, err = c.Beta.Vaults.Update(ctx, others[0], anthropic.BetaVaultUpdateParams{DisplayName: anthropic.String("x")})
	wantStatus(t, "update an archived vault", err, 409, "archived")
	dv, err := c.Beta.Vaults.Delete(ctx, others[1], anthropic.BetaVaultDeleteParams{})
	if err != nil || dv.ID != others[1] || dv.Type != "vault_deleted" {
		t.Fatalf("delete vault: %v %v", dv, err)
	}
	_, err = c.Beta.Vaults.Get(ctx, others[1], anthropic.BetaVaultGetParams{})
	wantStatus(t, "get a deleted vault", err, 404, others[1])

	// Credentials of each kind; every answer is free of the secrets.
	creds := c.Beta.Vaults.Credentials
	sb, err := creds.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{Type: "static_bearer",
			Token: secrets[0], MCPServerURL: "https://mcp.example.com/mcp"}},
		DisplayName: anthropic.String("github"), Metadata: map[string]string{"k": "v"},
	})
	if err != nil || sb.Type != "vault_credential" || !strings.HasPrefix(sb.ID, "vcrd_") || sb.VaultID != v.ID || sb.DisplayName != "github" ||
		sb.Auth.Type != "static_bearer" || sb.Auth.MCPServerURL != "https://mcp.example.com/mcp" || sb.Metadata["k"] != "v" {
		t.Fatalf("create static_bearer: %v %v", sb, err)
	}
	got.add(sb.RawJSON())
	expires := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	oa, err := creds.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfMCPOAuth: &anthropic.BetaManagedAgentsMCPOAuthCreateParams{Type: "mcp_oauth",
			AccessToken: secrets[1], MCPServerURL: "https://oauth.example.com/mcp", ExpiresAt: anthropic.Time(expires),
			Refresh: anthropic.BetaManagedAgentsMCPOAuthRefreshParams{ClientID: "client-1", RefreshToken: secrets[2],
				TokenEndpoint: "https://auth.example.com/token", Scope: anthropic.String("read"),
				TokenEndpointAuth: anthropic.BetaManagedAgentsMCPOAuthRefreshParamsTokenEndpointAuthUnion{
					OfClientSecretPost: &anthropic.BetaManagedAgentsTokenEndpointAuthPostParam{Type: "client_secret_post", ClientSecret: secrets[3]}}},
		}},
	})
	if err != nil || oa.Auth.Type != "mcp_oauth" || !oa.Auth.ExpiresAt.Equal(expires) || oa.Auth.Refresh.ClientID != "client-1" ||
		oa.Auth.Refresh.TokenEndpointAuth.Type != "client_secret_post" || oa.Auth.Refresh.Scope != "read" || oa.Auth.Refresh.TokenEndpoint != "https://auth.example.com/token" {
		t.Fatalf("create mcp_oauth: %v %v", oa, err)
	}
	got.add(oa.RawJSON())
	ev, err := creds.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfEnvironmentVariable: &anthropic.BetaManagedAgentsEnvironmentVariableCreateParams{Type: "environment_variable",
			SecretName: "API_KEY", SecretValue: secrets[4],
			Networking:        anthropic.BetaManagedAgentsCredentialNetworkingParamsOfLimited([]string{"api.example.com", "*.example.org"}),
			InjectionLocation: anthropic.BetaManagedAgentsInjectionLocationParams{Body: anthropic.Bool(true)},
		}},
	})
	if err != nil || ev.Auth.Type != "environment_variable" || ev.Auth.SecretName != "API_KEY" || ev.Auth.Networking.Type != "limited" ||
		len(ev.Auth.Networking.AllowedHosts) != 2 || !ev.Auth.InjectionLocation.Body || !ev.Auth.InjectionLocation.Header {
		t.Fatalf("create environment_variable: %v %v", ev, err)
	}
	got.add(ev.RawJSON())

	// Update: a new token, the metadata patched; the type cannot change.
	ub, err := creds.Update(ctx, sb.ID, anthropic.BetaVaultCredentialUpdateParams{VaultID: v.ID,
		Auth:     anthropic.BetaVaultCredentialUpdateParamsAuthUnion{OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerUpdateParams{Type: "static_bearer", Token: anthropic.String(secrets[5])}},
		Metadata: map[string]string{"k2": "v2"}})
	if err != nil || ub.Metadata["k"] != "v" || ub.Metadata["k2"] != "v2" || ub.Auth.MCPServerURL != "https://mcp.example.com/mcp" {
		t.Fatalf("update static_bearer: %v %v", ub, err)
	}
	got.add(ub.RawJSON())
	_, err = creds.Update(ctx, sb.ID, anthropic.BetaVaultCredentialUpdateParams{VaultID: v.ID,
		Auth: anthropic.BetaVaultCredentialUpdateParamsAuthUnion{OfEnvironmentVariable: &anthropic.BetaManagedAgentsEnvironmentVariableUpdateParams{Type: "environment_variable", SecretValue: anthropic.String("x")}}})
	wantStatus(t, "change a credential's type", err, 400, "auth.type")

	// The daemon's side: the values open, with placeholders and hosts.
	row, err := d.Store().GetVault(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	tn := row.TenantID
	env, err := d.Vaults().EnvCredentials(ctx, tn, []string{v.ID})
	if err != nil || len(env) != 1 || env[0].Value != secrets[4] || env[0].EnvVar != "API_KEY" || env[0].Placeholder != egress.Placeholder(ev.ID) ||
		!env[0].Header || !env[0].Body || len(env[0].Hosts) != 2 || !env[0].Hosts[1].Wildcard {
		t.Fatalf("EnvCredentials: %v %v", env, err)
	}
	if tok, err := d.Vaults().MCPAuthorization(ctx, tn, []string{v.ID}, "https://MCP.example.com:443/mcp/"); err != nil || tok != secrets[5] {
		t.Fatalf("MCPAuthorization of the static bearer: %v (is it the updated token? %v)", err, tok == secrets[5])
	}
	if err := d.Vaults().CheckVaults(ctx, tn, []string{v.ID, others[0]}); err == nil || !strings.Contains(err.Error(), others[0]) {
		t.Fatalf("CheckVaults with an archived vault: %v", err)
	}

	// Listing credentials pages; archive hides one unless include_archived.
	countCreds := func(p anthropic.BetaVaultCredentialListParams) int {
		n := 0
		for x := range creds.ListAutoPaging(ctx, v.ID, p).All() {
			got.add(x.RawJSON())
			n++
		}
		return n
	}
	if n := countCreds(anthropic.BetaVaultCredentialListParams{Limit: anthropic.Int(2)}); n != 3 {
		t.Fatalf("listed %d credentials, want 3", n)
	}
	ac, err := creds.Archive(ctx, oa.ID, anthropic.BetaVaultCredentialArchiveParams{VaultID: v.ID})
	if err != nil || ac.ArchivedAt.IsZero() {
		t.Fatalf("archive credential: %v %v", ac, err)
	}
	if n := countCreds(anthropic.BetaVaultCredentialListParams{Limit: anthropic.Int(1)}); n != 2 {
		t.Fatalf("listed %d credentials without archived, want 2", n)
	}
	if n := countCreds(anthropic.BetaVaultCredentialListParams{Limit: anthropic.Int(1), IncludeArchived: anthropic.Bool(true)}); n != 3 {
		t.Fatalf("listed %d credentials with archived, want 3", n)
	}
	gc, err := creds.Get(ctx, ev.ID, anthropic.BetaVaultCredentialGetParams{VaultID: v.ID})
	if err != nil || gc.ID != ev.ID {
		t.Fatalf("get credential: %v %v", gc, err)
	}
	got.add(gc.RawJSON())
	_, err = creds.Get(ctx, ev.ID, anthropic.BetaVaultCredentialGetParams{VaultID: others[2]})
	wantStatus(t, "a credential through another vault", err, 404, ev.ID)

	// Another tenant sees none of it.
	oc := sdkClient(d, tenantKey(t, d, "other"))
	_, err = oc.Beta.Vaults.Get(ctx, v.ID, anthropic.BetaVaultGetParams{})
	wantStatus(t, "another tenant's vault", err, 404, v.ID)
	_, err = oc.Beta.Vaults.Credentials.Get(ctx, ev.ID, anthropic.BetaVaultCredentialGetParams{VaultID: v.ID})
	wantStatus(t, "another tenant's credential", err, 404, v.ID)
	_, err = oc.Beta.Vaults.Credentials.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{
		OfStaticBearer: &anthropic.BetaManagedAgentsStaticBearerCreateParams{Type: "static_bearer", Token: "t", MCPServerURL: "https://x.example.com"}}})
	wantStatus(t, "a credential in another tenant's vault", err, 404, v.ID)
	_, err = oc.Beta.Vaults.Delete(ctx, v.ID, anthropic.BetaVaultDeleteParams{})
	wantStatus(t, "delete another tenant's vault", err, 404, v.ID)
	if l, err := oc.Beta.Vaults.List(ctx, anthropic.BetaVaultListParams{}); err != nil || len(l.Data) != 0 {
		t.Fatalf("another tenant lists %v %v", l, err)
	}
	if err := d.Vaults().CheckVaults(ctx, "tnt_other", []string{v.ID}); err == nil || !strings.Contains(err.Error(), v.ID) {
		t.Fatalf("CheckVaults of another tenant's vault: %v", err)
	}

	// Bad input names the field or the limit.
	bad := func(what, body string, status int, mentions ...string) {
		t.Helper()
		code, out := call(t, "POST", d.URL+"/v1/vaults/"+v.ID+"/credentials", d.AdminKey, body, "Content-Type", "application/json")
		raw, _ := json.Marshal(out)
		got.add(string(raw))
		if code != status {
			t.Fatalf("%s: %d %s, want %d", what, code, raw, status)
		}
		for _, m := range mentions {
			if !strings.Contains(string(raw), m) {
				t.Fatalf("%s: %s does not mention %q", what, raw, m)
			}
		}
	}
	bad("unknown kind", `{"auth":{"type":"ssh_key","token":"x"}}`, 400, "auth.type", "ssh_key")
	bad("secret over the limit", `{"auth":{"type":"static_bearer","mcp_server_url":"https://x.example.com","token":"`+strings.Repeat("s", 16<<10+1)+`"}}`, 413, "auth.token", "16384")
	bad("bad allowed_hosts entry", `{"auth":{"type":"environment_variable","secret_name":"K","secret_value":"`+secrets[4]+`","networking":{"type":"limited","allowed_hosts":["ok.example.com","https://x.example.com/path"]}}}`,
		400, "auth.networking.allowed_hosts[1]")
	bad("unknown field", `{"auth":{"type":"static_bearer","mcp_server_url":"https://x.example.com","token":"`+secrets[0]+`","scope":"x"}}`, 400, "auth.scope")
	bad("none takes no client secret", `{"auth":{"type":"mcp_oauth","mcp_server_url":"https://x.example.com","access_token":"a","refresh":{"token_endpoint":"https://a.example.com/t","client_id":"c","refresh_token":"r","token_endpoint_auth":{"type":"none","client_secret":"`+secrets[3]+`"}}}}`,
		400, "auth.refresh.token_endpoint_auth.client_secret")
	bad("a past expiry", `{"auth":{"type":"mcp_oauth","mcp_server_url":"https://x.example.com","access_token":"a","expires_at":"2001-01-01T00:00:00Z"}}`, 400, "auth.expires_at", "future")
	bad("a reserved variable", `{"auth":{"type":"environment_variable","secret_name":"HTTPS_PROXY","secret_value":"v","networking":{"type":"unrestricted"}}}`, 400, "auth.secret_name")
	bad("a second API_KEY", `{"auth":{"type":"environment_variable","secret_name":"API_KEY","secret_value":"v","networking":{"type":"unrestricted"}}}`, 409, "API_KEY")
	code, out := call(t, "GET", d.URL+"/v1/vaults?order=desc", d.AdminKey, "")
	if code != 400 || !strings.Contains(fmt1(out), "order") {
		t.Fatalf("a list with a query parameter vaults do not take: %d %v", code, out)
	}

	// Delete; then the secret is nowhere: answers, log, database file.
	dc, err := creds.Delete(ctx, sb.ID, anthropic.BetaVaultCredentialDeleteParams{VaultID: v.ID})
	if err != nil || dc.ID != sb.ID || dc.Type != "vault_credential_deleted" {
		t.Fatalf("delete credential: %v %v", dc, err)
	}
	_, err = creds.Get(ctx, sb.ID, anthropic.BetaVaultCredentialGetParams{VaultID: v.ID})
	wantStatus(t, "get a deleted credential", err, 404, sb.ID)
	var files []string
	for _, f := range []string{"state.db", "state.db-wal"} {
		b, err := os.ReadFile(filepath.Join(d.Config.Home, f))
		if err == nil {
			files = append(files, string(b))
		}
	}
	if len(files) == 0 {
		t.Fatal("no database file to look into")
	}
	for _, s := range secrets {
		for where, texts := range map[string][]string{"an API answer": got.raw, "the daemon log": {logs.String()}, "the database file": files} {
			for _, text := range texts {
				if strings.Contains(text, s) {
					t.Errorf("secret %q is in %s", s, where)
				}
			}
		}
	}
	if !strings.Contains(strings.Join(files, ""), ev.ID) {
		t.Fatal("the database file does not even hold the credential id; the check above looked at the wrong file")
	}
}

func fmt1(v any) string { b, _ := json.Marshal(v); return string(b) }

// TestVaultOAuthRefreshAndValidate: an mcp_oauth credential near its
// expiry is refreshed through a local token endpoint before use (the new
// access token, rotated refresh token and expiry are stored), concurrent
// users share one refresh, and mcp_oauth_validate probes a local MCP
// server built with the official Go MCP SDK that requires the token.
func TestVaultOAuthRefreshAndValidate(t *testing.T) {
	ctx := context.Background()
	logs := &lockedBuffer{}
	d := daemontest.StartLogged(t, logs)
	c := sdkClient(d, d.AdminKey)

	var exchanges atomic.Int64
	var refuse atomic.Bool
	var current atomic.Value
	current.Store("access-OLD-secret")
	tokens := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, basic := r.BasicAuth()
		if r.Form.Get("grant_type") != "refresh_token" || r.Form.Get("scope") != "tools" || !basic || id != "client-1" || secret != "client-secret-xyz" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			w.Write([]byte(`{"error":"invalid_client","echo":"` + r.Form.Get("refresh_token") + `"}`))
			return
		}
		n := exchanges.Add(1)
		want := "refresh-secret-1"
		if n > 1 {
			want = "refresh-secret-2"
		}
		if r.Form.Get("refresh_token") != want || refuse.Load() {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			w.Write([]byte(`{"error":"invalid_grant","echo":"` + r.Form.Get("refresh_token") + `"}`))
			return
		}
		tok := "access-NEW-secret-" + string(rune('0'+n))
		current.Store(tok)
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"access_token": tok, "token_type": "Bearer", "expires_in": 3600, "refresh_token": "refresh-secret-2"})
	}))
	t.Cleanup(tokens.Close)

	srv := mcp.NewServer(&mcp.Implementation{Name: "walk", Version: "1"}, nil)
	mcp.AddTool(srv, &mcp.Tool{Name: "echo"}, func(ctx context.Context, req *mcp.CallToolRequest, in struct{}) (*mcp.CallToolResult, any, error) {
		return &mcp.CallToolResult{}, nil, nil
	})
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mcpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer "+current.Load().(string) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(401)
			w.Write([]byte(`{"error":"invalid_token","got":"` + r.Header.Get("Authorization") + `"}`))
			return
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(mcpSrv.Close)

	v, err := c.Beta.Vaults.New(ctx, anthropic.BetaVaultNewParams{DisplayName: "oauth"})
	if err != nil {
		t.Fatal(err)
	}
	soon := time.Now().Add(time.Minute).UTC() // within the 5-minute margin
	cr, err := c.Beta.Vaults.Credentials.New(ctx, v.ID, anthropic.BetaVaultCredentialNewParams{
		Auth: anthropic.BetaVaultCredentialNewParamsAuthUnion{OfMCPOAuth: &anthropic.BetaManagedAgentsMCPOAuthCreateParams{Type: "mcp_oauth",
			AccessToken: "access-OLD-secret", MCPServerURL: mcpSrv.URL, ExpiresAt: anthropic.Time(soon),
			Refresh: anthropic.BetaManagedAgentsMCPOAuthRefreshParams{ClientID: "client-1", RefreshToken: "refresh-secret-1",
				TokenEndpoint: tokens.URL, Scope: anthropic.String("tools"),
				TokenEndpointAuth: anthropic.BetaManagedAgentsMCPOAuthRefreshParamsTokenEndpointAuthUnion{
					OfClientSecretBasic: &anthropic.BetaManagedAgentsTokenEndpointAuthBasicParam{Type: "client_secret_basic", ClientSecret: "client-secret-xyz"}}},
		}},
	})
	if err != nil {
		t.Fatal(err)
	}
	row, err := d.Store().GetVault(ctx, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	tn := row.TenantID

	// Eight users at once: one exchange, one new token for all.
	var wg sync.WaitGroup
	toks := make([]string, 8)
	errs := make([]error, 8)
	for i := range toks {
		wg.Add(1)
		go func() {
			defer wg.Done()
			toks[i], errs[i] = d.Vaults().MCPAuthorization(ctx, tn, []string{v.ID}, mcpSrv.URL)
		}()
	}
	wg.Wait()
	for i := range toks {
		if errs[i] != nil || toks[i] != "access-NEW-secret-1" {
			t.Fatalf("MCPAuthorization %d: %q %v", i, toks[i], errs[i])
		}
	}
	if n := exchanges.Load(); n != 1 {
		t.Fatalf("%d token exchanges for eight concurrent users, want 1", n)
	}
	after, err := c.Beta.Vaults.Credentials.Get(ctx, cr.ID, anthropic.BetaVaultCredentialGetParams{VaultID: v.ID})
	if err != nil || !after.Auth.ExpiresAt.After(soon.Add(30*time.Minute)) {
		t.Fatalf("the stored expiry after the refresh: %v %v", after.Auth.ExpiresAt, err)
	}
	// Fresh now: no second exchange.
	if tok, err := d.Vaults().MCPAuthorization(ctx, tn, []string{v.ID}, mcpSrv.URL); err != nil || tok != "access-NEW-secret-1" || exchanges.Load() != 1 {
		t.Fatalf("a fresh token was refreshed again: %q %v (%d exchanges)", tok, err, exchanges.Load())
	}

	// Validate: valid with the refreshed token.
	val, err := c.Beta.Vaults.Credentials.MCPOAuthValidate(ctx, cr.ID, anthropic.BetaVaultCredentialMCPOAuthValidateParams{VaultID: v.ID})
	if err != nil || val.Status != "valid" || val.Type != "vault_credential_validation" || val.CredentialID != cr.ID || val.VaultID != v.ID || !val.HasRefreshToken {
		t.Fatalf("validate: %v %v", val.RawJSON(), err)
	}
	// The server revokes the token: the probe's 401 makes it refresh with
	// the rotated refresh token, and the new token is valid.
	current.Store("revoked")
	val, err = c.Beta.Vaults.Credentials.MCPOAuthValidate(ctx, cr.ID, anthropic.BetaVaultCredentialMCPOAuthValidateParams{VaultID: v.ID})
	if err != nil || val.Status != "valid" || val.Refresh.Status != "succeeded" || exchanges.Load() != 2 {
		t.Fatalf("validate after a revocation: %v %v (%d exchanges)", val.RawJSON(), err, exchanges.Load())
	}
	// The token endpoint refuses from now on: invalid, with its answer
	// scrubbed of the refresh token it echoes.
	current.Store("revoked-again")
	refuse.Store(true)
	val, err = c.Beta.Vaults.Credentials.MCPOAuthValidate(ctx, cr.ID, anthropic.BetaVaultCredentialMCPOAuthValidateParams{VaultID: v.ID})
	if err != nil || val.Status != "invalid" || val.Refresh.Status != "failed" || val.Refresh.HTTPResponse.StatusCode != 400 ||
		!strings.Contains(val.Refresh.HTTPResponse.Body, "invalid_grant") {
		t.Fatalf("validate with a refusing token endpoint: %v %v", val.RawJSON(), err)
	}
	_, _, err = d.Vaults().Refresh(ctx, cr.ID, true)
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") || !strings.Contains(err.Error(), cr.ID) {
		t.Fatalf("a failed refresh's error: %v", err)
	}
	all := val.RawJSON() + err.Error() + logs.String()
	for _, s := range []string{"refresh-secret-2", "client-secret-xyz", "access-NEW-secret-2", "access-OLD-secret"} {
		if strings.Contains(all, s) {
			t.Errorf("secret %q is in a validation answer, an error or the log", s)
		}
	}
}
