package agentkernel_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/egress"
)

// TestEveryVaultFieldWorksOrIsRefused is TestEveryManagedFieldWorksOrIsRefused
// for the vault and credential bodies: every field of the SDK's vault
// params is sent alone (with what its body requires) and must show its
// effect — returned where that is its purpose, used by the daemon where it
// is a secret (the proxy's credential, an MCP server's token, what the
// token endpoint is sent) — or be refused naming it.
func TestEveryVaultFieldWorksOrIsRefused(t *testing.T) {
	w := newVaultWalker(t)
	bodies := []walkBody{
		{"vault.create", anthropic.BetaVaultNewParams{}},
		{"vault.update", anthropic.BetaVaultUpdateParams{}},
		{"credential.create", anthropic.BetaVaultCredentialNewParams{}},
		{"credential.update", anthropic.BetaVaultCredentialUpdateParams{}},
	}
	rules := w.rules()
	n := walkBodies(t, rules, bodies, w.newCase)
	t.Logf("%d fields checked", n)
}

type vaultWalker struct {
	*managedWalker
	tenant string
	// tokens is a local OAuth token endpoint that records what it is sent.
	tokens *httptest.Server
	mu     sync.Mutex
	sent   []string // each exchange's form and basic auth, as text
}

func newVaultWalker(t *testing.T) *vaultWalker {
	w := &vaultWalker{managedWalker: &managedWalker{}}
	w.d = daemontest.Start(t)
	w.tokens = httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, _ := r.BasicAuth()
		w.mu.Lock()
		w.sent = append(w.sent, r.Form.Encode()+" basic="+id+":"+secret)
		w.mu.Unlock()
		rw.Header().Set("Content-Type", "application/json")
		rw.Write([]byte(`{"access_token":"fresh","token_type":"bearer","expires_in":3600}`))
	}))
	t.Cleanup(w.tokens.Close)
	v := w.post(t, "/v1/vaults", map[string]any{"display_name": "walk"})
	row, err := w.d.Store().GetVault(context.Background(), v["id"].(string))
	if err != nil {
		t.Fatal(err)
	}
	w.tenant = row.TenantID
	return w
}

// kindOf is the credential kind a leaf's path is in ("" outside auth).
func kindOf(path string) string {
	switch {
	case strings.Contains(path, "<OfStaticBearer>"):
		return "static_bearer"
	case strings.Contains(path, "<OfMCPOAuth>"):
		return "mcp_oauth"
	case strings.Contains(path, "<OfEnvironmentVariable>"):
		return "environment_variable"
	}
	return ""
}

// credentialBody is a valid create body of a kind.
func (w *vaultWalker) credentialBody(kind, marker string) map[string]any {
	switch kind {
	case "mcp_oauth":
		return map[string]any{"type": "mcp_oauth", "mcp_server_url": "https://oauth.example.com/" + marker, "access_token": "at-" + marker,
			"refresh": map[string]any{"token_endpoint": w.tokens.URL, "client_id": "cid", "refresh_token": "rt-" + marker,
				"token_endpoint_auth": map[string]any{"type": "client_secret_basic", "client_secret": "cs-" + marker}}}
	case "environment_variable":
		return map[string]any{"type": "environment_variable", "secret_name": "WALK_" + strings.ReplaceAll(marker, "-", "_"),
			"secret_value": "sv-" + marker, "networking": map[string]any{"type": "unrestricted"}}
	}
	return map[string]any{"type": "static_bearer", "mcp_server_url": "https://bearer.example.com/" + marker, "token": "tok-" + marker}
}

func (w *vaultWalker) newCase(t *testing.T, body string, typ reflect.Type, l leaf, r fieldRule) *fieldCase {
	c := &fieldCase{body: body, leaf: l, marker: w.marker(), state: map[string]any{}}
	vaultID := w.post(t, "/v1/vaults", map[string]any{"display_name": "walk"})["id"].(string)
	c.state["vault"] = vaultID
	kind := kindOf(l.path)
	var base map[string]any
	var path string
	switch body {
	case "vault.create":
		base, path = map[string]any{"display_name": "walk"}, "/v1/vaults"
	case "vault.update":
		base, path = map[string]any{}, "/v1/vaults/"+vaultID
	case "credential.create":
		base, path = map[string]any{}, "/v1/vaults/"+vaultID+"/credentials"
		if kind == "" {
			base["auth"] = w.credentialBody("static_bearer", c.marker)
		}
	case "credential.update":
		if kind == "" {
			kind = "static_bearer"
		}
		cr := w.post(t, "/v1/vaults/"+vaultID+"/credentials", map[string]any{"auth": w.credentialBody(kind, c.marker)})
		c.state["credential"] = cr["id"]
		base, path = map[string]any{}, "/v1/vaults/"+vaultID+"/credentials/"+cr["id"].(string)
	}
	c.state["kind"] = kind
	// What a body requires besides the field under test.
	required := map[string]any{}
	if body == "credential.create" && kind != "" {
		for k, v := range w.credentialBody(kind, c.marker) {
			required[".auth<Of"+map[string]string{"static_bearer": "StaticBearer", "mcp_oauth": "MCPOAuth", "environment_variable": "EnvironmentVariable"}[kind]+">."+k] = v
		}
		delete(required, ".auth<OfMCPOAuth>.refresh") // only when the field is in it
		required[".auth<OfMCPOAuth>.refresh.token_endpoint"] = w.tokens.URL
		required[".auth<OfMCPOAuth>.refresh.client_id"] = "cid"
		required[".auth<OfMCPOAuth>.refresh.refresh_token"] = "rt-" + c.marker
		required[".auth<OfMCPOAuth>.refresh.token_endpoint_auth"] = map[string]any{"type": "none"}
		required[".auth<OfMCPOAuth>.refresh.token_endpoint_auth<OfClientSecretBasic>.client_secret"] = "cs-" + c.marker
		required[".auth<OfMCPOAuth>.refresh.token_endpoint_auth<OfClientSecretPost>.client_secret"] = "cs-" + c.marker
	}
	required[".auth<OfEnvironmentVariable>.networking<OfLimited>.allowed_hosts"] = []string{"walk.example.com"}
	fill := func(p string) (any, bool) { v, ok := required[p]; return v, ok }
	c.value = r.valueFor(t, c)
	c.send = func() (int, map[string]any) {
		top := synth(t, typ, l.steps, c.value, fill).(map[string]any)
		for k, v := range top {
			base[k] = v
		}
		c.state["sent"] = base
		return w.do(t, "POST", path, base)
	}
	return c
}

// credentialOf is the credential a case created or updated.
func credentialOf(c *fieldCase, out map[string]any) (vaultID, id string) {
	return c.state["vault"].(string), out["id"].(string)
}

// echoesAt checks that the answer and a later GET hold the case's value
// at path.
func (w *vaultWalker) echoesAt(path string) func(*testing.T, *fieldCase) {
	return func(t *testing.T, c *fieldCase) {
		out := ok(t, c)
		if out == nil {
			return
		}
		get := "/v1/vaults/" + out["id"].(string)
		if strings.HasPrefix(c.body, "credential.") {
			get = "/v1/vaults/" + c.state["vault"].(string) + "/credentials/" + out["id"].(string)
		}
		_, again := w.do(t, "GET", get, nil)
		for _, o := range []map[string]any{out, again} {
			got := jsonAt(o, path)
			if ts, isTime := c.value.(string); isTime && strings.HasSuffix(path, "expires_at") {
				a, _ := time.Parse(time.RFC3339, ts)
				b, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(got))
				if !a.Equal(b) {
					t.Errorf("%s %s: %s is %v, want %v", c.body, c.leaf.path, path, got, ts)
				}
				continue
			}
			holds(t, c, path, got, c.value)
		}
	}
}

// envCred is what the egress proxy would get for the case's credential.
func (w *vaultWalker) envCred(t *testing.T, c *fieldCase, out map[string]any) egress.Credential {
	vaultID, id := credentialOf(c, out)
	creds, err := w.d.Vaults().EnvCredentials(context.Background(), w.tenant, []string{vaultID})
	if err != nil {
		t.Fatalf("EnvCredentials: %v", err)
	}
	for _, ec := range creds {
		if ec.ID == id {
			return ec
		}
	}
	t.Fatalf("%s %s: EnvCredentials has no %s", c.body, c.leaf.path, id)
	return egress.Credential{}
}

// usedAs checks the daemon's use of the field: see gets the case and the
// proxy's credential, the MCP token, or what the token endpoint was sent.
func (w *vaultWalker) proxyGets(see func(c *fieldCase, ec egress.Credential) bool) func(*testing.T, *fieldCase) {
	return func(t *testing.T, c *fieldCase) {
		out := ok(t, c)
		if out == nil {
			return
		}
		if ec := w.envCred(t, c, out); !see(c, ec) {
			t.Errorf("%s %s = %v: the proxy's credential is %s (header %v body %v hosts %v)", c.body, c.leaf.path, c.value, ec, ec.Header, ec.Body, ec.Hosts)
		}
	}
}

func (w *vaultWalker) mcpToken(t *testing.T, c *fieldCase) {
	out := ok(t, c)
	if out == nil {
		return
	}
	vaultID, _ := credentialOf(c, out)
	url := jsonAt(out, ".auth.mcp_server_url").(string)
	tok, err := w.d.Vaults().MCPAuthorization(context.Background(), w.tenant, []string{vaultID}, url)
	if err != nil || tok != c.value {
		t.Errorf("%s %s: the MCP server would get %q (%v), want %v", c.body, c.leaf.path, tok, err, c.value)
	}
}

// tokenEndpointGets refreshes the case's credential and checks what the
// token endpoint was sent.
func (w *vaultWalker) tokenEndpointGets(t *testing.T, c *fieldCase) {
	out := ok(t, c)
	if out == nil {
		return
	}
	_, id := credentialOf(c, out)
	if _, _, err := w.d.Vaults().Refresh(context.Background(), id, true); err != nil {
		t.Errorf("%s %s: refresh: %v", c.body, c.leaf.path, err)
		return
	}
	w.mu.Lock()
	last := w.sent[len(w.sent)-1]
	w.mu.Unlock()
	want := fmt.Sprint(c.value)
	if e, ok := c.state["expect"]; ok {
		want = e.(string)
	}
	if !strings.Contains(last, want) {
		t.Errorf("%s %s = %v: the token endpoint was sent %q", c.body, c.leaf.path, c.value, last)
	}
}

func (w *vaultWalker) rules() []fieldRule {
	const crud = `^credential\.(create|update) `
	url := func(t *testing.T, c *fieldCase) any { return "https://walk.example.com/" + c.marker }
	secretMarker := func(t *testing.T, c *fieldCase) any { return "secret-" + c.marker }
	future := func(t *testing.T, c *fieldCase) any { return time.Now().Add(48 * time.Hour).UTC().Format(time.RFC3339) }
	return []fieldRule{
		rule(`^vault\.(create|update) \.display_name$`).does(w.echoesAt(".display_name")),
		rule(`^vault\.(create|update) \.metadata$`).does(w.echoesAt(".metadata")),
		rule(crud + `\.display_name$`).does(w.echoesAt(".display_name")),
		rule(crud + `\.metadata$`).does(w.echoesAt(".metadata")),
		rule(crud + `\.auth<Of\w+>\.type$`).does(func(t *testing.T, c *fieldCase) { w.echoesAt(".auth.type")(t, c) }),

		// static_bearer
		rule(crud + `\.auth<OfStaticBearer>\.mcp_server_url$`).with(url).does(w.echoesAt(".auth.mcp_server_url")),
		rule(crud + `\.auth<OfStaticBearer>\.token$`).with(secretMarker).does(w.mcpToken),

		// mcp_oauth
		rule(crud + `\.auth<OfMCPOAuth>\.mcp_server_url$`).with(url).does(w.echoesAt(".auth.mcp_server_url")),
		rule(crud + `\.auth<OfMCPOAuth>\.access_token$`).with(secretMarker).does(w.mcpToken),
		rule(crud + `\.auth<OfMCPOAuth>\.expires_at$`).with(future).does(w.echoesAt(".auth.expires_at")),
		rule(`^credential\.create \.auth<OfMCPOAuth>\.refresh\.token_endpoint$`).with(func(t *testing.T, c *fieldCase) any { return w.tokens.URL + "/" + c.marker }).
			does(w.echoesAt(".auth.refresh.token_endpoint")),
		rule(`^credential\.create \.auth<OfMCPOAuth>\.refresh\.client_id$`).does(func(t *testing.T, c *fieldCase) { w.tokenEndpointGets(t, c) }),
		rule(crud + `\.auth<OfMCPOAuth>\.refresh\.(refresh_token|scope)$`).with(secretMarker).does(w.tokenEndpointGets),
		rule(`^credential\.create \.auth<OfMCPOAuth>\.refresh\.resource$`).with(url).does(func(t *testing.T, c *fieldCase) {
			c.state["expect"] = "resource=" + strings.NewReplacer("/", "%2F", ":", "%3A").Replace(fmt.Sprint(c.value)) // form-encoded
			w.tokenEndpointGets(t, c)
		}),
		rule(`^credential\.create \.auth<OfMCPOAuth>\.refresh\.token_endpoint_auth<Of\w+>\.type$`).does(w.echoesAt(".auth.refresh.token_endpoint_auth.type")),
		rule(crud + `\.auth<OfMCPOAuth>\.refresh\.token_endpoint_auth<OfClientSecret(Basic|Post)>\.client_secret$`).with(secretMarker).does(w.tokenEndpointGets),
		// An update's type is the type of the secret sent; the credential
		// keeps its own (SDK docs), so the answer shows the stored one.
		rule(`^credential\.update \.auth<OfMCPOAuth>\.refresh\.token_endpoint_auth<OfClientSecret(Basic|Post)>\.type$`).does(func(t *testing.T, c *fieldCase) {
			c.value = "client_secret_basic"
			w.echoesAt(".auth.refresh.token_endpoint_auth.type")(t, c)
		}),

		// environment_variable
		rule(`^credential\.create \.auth<OfEnvironmentVariable>\.secret_name$`).with(func(t *testing.T, c *fieldCase) any {
			return "WALK_" + strings.ReplaceAll(c.marker, "-", "_") + "_X"
		}).does(w.proxyGets(func(c *fieldCase, ec egress.Credential) bool { return ec.EnvVar == c.value })),
		rule(crud + `\.auth<OfEnvironmentVariable>\.secret_value$`).with(secretMarker).does(w.proxyGets(func(c *fieldCase, ec egress.Credential) bool {
			return ec.Value == c.value && ec.Placeholder == egress.Placeholder(ec.ID)
		})),
		rule(crud + `\.auth<OfEnvironmentVariable>\.injection_location\.body$`).does(w.proxyGets(func(c *fieldCase, ec egress.Credential) bool { return ec.Body })),
		rule(crud + `\.auth<OfEnvironmentVariable>\.injection_location\.header$`).with(false).does(func(t *testing.T, c *fieldCase) {
			// Header alone off leaves nothing to substitute: refused.
			expectRefused(t, c, "injection_location")
		}),
		rule(crud + `\.auth<OfEnvironmentVariable>\.networking<OfUnrestricted>\.type$`).does(w.proxyGets(func(c *fieldCase, ec egress.Credential) bool { return ec.Hosts == nil })),
		rule(crud + `\.auth<OfEnvironmentVariable>\.networking<OfLimited>\.(type|allowed_hosts\[\])$`).with(func(t *testing.T, c *fieldCase) any {
			if strings.HasSuffix(c.leaf.path, ".type") {
				return "limited"
			}
			return "walk.example.com"
		}).does(w.proxyGets(func(c *fieldCase, ec egress.Credential) bool {
			return len(ec.Hosts) == 1 && ec.Hosts[0].Match("walk.example.com", 443) && !ec.Hosts[0].Match("other.example.com", 443)
		})),
	}
}
