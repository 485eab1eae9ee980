package cli_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
	"github.com/agentkernel/agentkernel/internal/vault"
)

// apiPost posts JSON to the daemon with the home's admin key.
func apiPost(t *testing.T, s *server, path string, body any) map[string]any {
	t.Helper()
	key, err := os.ReadFile(filepath.Join(s.home, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(body)
	req, _ := http.NewRequest("POST", "http://"+s.addr+path, bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(key)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(resp.Body)
	var out map[string]any
	if err := json.Unmarshal(raw, &out); err != nil || resp.StatusCode != 200 {
		t.Fatalf("POST %s: %d %s", path, resp.StatusCode, raw)
	}
	return out
}

// vaultState opens the home's store and key file as the daemon does and
// returns every env credential's value and every row's key id.
func vaultState(t *testing.T, home, tenant, vaultID string) (values map[string]string, keyIDs map[string]string) {
	t.Helper()
	ctx := context.Background()
	st, err := sqlite.Open(ctx, filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	keys, err := vault.OpenKeyring(filepath.Join(home, "vault.keys"))
	if err != nil {
		t.Fatal(err)
	}
	svc := vault.New(vault.Config{Store: st, Keys: keys})
	creds, err := svc.EnvCredentials(ctx, tenant, []string{vaultID})
	if err != nil {
		t.Fatalf("EnvCredentials: %v", err)
	}
	values = map[string]string{}
	for _, c := range creds {
		values[c.EnvVar] = c.Value
	}
	rows, err := st.ListVaultCredentials(ctx, storeList(tenant, vaultID))
	if err != nil {
		t.Fatal(err)
	}
	keyIDs = map[string]string{}
	for _, r := range rows {
		keyIDs[r.ID] = r.KeyID
	}
	return values, keyIDs
}

func keyFileIDs(t *testing.T, home string) (current string, all []string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(home, "vault.keys"))
	if err != nil {
		t.Fatal(err)
	}
	var kf struct {
		Current string `json:"current"`
		Keys    []struct {
			ID string `json:"id"`
		} `json:"keys"`
	}
	if err := json.Unmarshal(b, &kf); err != nil {
		t.Fatal(err)
	}
	for _, k := range kf.Keys {
		all = append(all, k.ID)
	}
	return kf.Current, all
}

// TestVaultRotateKey: `agentkernel vault rotate-key` with the daemon
// running re-encrypts every credential under a new key, the daemon keeps
// using them (it follows the key file), a rotation SIGKILLed halfway loses
// nothing and a rerun finishes it, and --drop-old then leaves one key.
func TestVaultRotateKey(t *testing.T) {
	bin := staticBinary(t)
	home := t.TempDir()
	s := startServer(t, bin, home, freePort(t))
	defer s.stop(t)
	env := s.env()

	fi, err := os.Stat(filepath.Join(home, "vault.keys"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file after the first start: %v %v", fi, err)
	}
	first, keys := keyFileIDs(t, home)
	if len(keys) != 1 {
		t.Fatalf("first start made keys %v", keys)
	}

	// An MCP server that takes one bearer, for the daemon's side.
	srv := mcp.NewServer(&mcp.Implementation{Name: "rot", Version: "1"}, nil)
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, nil)
	mcpSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer mcp-token-SECRET" {
			w.WriteHeader(401)
			return
		}
		h.ServeHTTP(w, r)
	}))
	defer mcpSrv.Close()

	v := apiPost(t, s, "/v1/vaults", map[string]any{"display_name": "rot"})
	vid := v["id"].(string)
	want := map[string]string{}
	for _, n := range []string{"A", "B", "C", "D"} {
		apiPost(t, s, "/v1/vaults/"+vid+"/credentials", map[string]any{"auth": map[string]any{"type": "environment_variable",
			"secret_name": "KEY_" + n, "secret_value": "value-" + n, "networking": map[string]any{"type": "unrestricted"}}})
		want["KEY_"+n] = "value-" + n
	}
	oa := apiPost(t, s, "/v1/vaults/"+vid+"/credentials", map[string]any{"auth": map[string]any{"type": "mcp_oauth",
		"mcp_server_url": mcpSrv.URL, "access_token": "mcp-token-SECRET"}})
	validate := func(when string) {
		t.Helper()
		out := apiPost(t, s, "/v1/vaults/"+vid+"/credentials/"+oa["id"].(string)+"/mcp_oauth_validate", map[string]any{})
		if out["status"] != "valid" {
			t.Fatalf("%s: the daemon's validation is %v", when, out)
		}
	}
	validate("before any rotation")
	db, err := sqlite.Open(context.Background(), filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	vrow, err := db.GetVault(context.Background(), vid)
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	tenant := vrow.TenantID
	check := func(when string, wantKeys ...string) map[string]string {
		t.Helper()
		values, ids := vaultState(t, home, tenant, vid)
		for k, v := range want {
			if values[k] != v {
				t.Fatalf("%s: %s opens to %q, want %q", when, k, values[k], v)
			}
		}
		for id, k := range ids {
			if len(wantKeys) > 0 && !contains(wantKeys, k) {
				t.Fatalf("%s: credential %s is under key %s, want one of %v", when, id, k, wantKeys)
			}
		}
		return ids
	}
	check("before", first)

	// A full rotation while the daemon runs.
	out := run(t, bin, env, 0, "vault", "rotate-key")
	second, keys := keyFileIDs(t, home)
	if second == first || len(keys) != 2 || !strings.Contains(out, "re-encrypted 5 credentials with key "+second) || !strings.Contains(out, "old keys kept") {
		t.Fatalf("rotate-key: %q; keys %v", out, keys)
	}
	check("after a rotation", second)
	validate("after a rotation (the daemon re-reads the key file)")

	// Halfway: the rotation is killed after its first credential.
	flag := filepath.Join(home, "failpoint-rekey-hang")
	os.WriteFile(flag, nil, 0o600)
	cmd := exec.Command(bin, "vault", "rotate-key")
	cmd.Env = env
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFile(t, flag+".reached", &server{stderr: &stderr})
	cmd.Process.Kill() // SIGKILL
	cmd.Wait()
	os.Remove(flag)
	third, keys := keyFileIDs(t, home)
	ids := check("after a rotation killed halfway", second, third)
	moved := 0
	for _, k := range ids {
		if k == third {
			moved++
		}
	}
	if moved != 1 || len(keys) != 3 {
		t.Fatalf("the killed rotation moved %d credentials (want 1, where the failpoint stopped it); keys %v", moved, keys)
	}
	validate("after a rotation killed halfway")

	// Dropping old keys before the rotation is complete is refused; a
	// rerun finishes and drops.
	out = run(t, bin, env, 0, "vault", "rotate-key", "--no-new-key", "--drop-old")
	cur, keys := keyFileIDs(t, home)
	if cur != third || len(keys) != 1 || !strings.Contains(out, "re-encrypted 4 credentials") || !strings.Contains(out, "dropped old keys") {
		t.Fatalf("the rerun: %q; keys %v (current %s)", out, keys, cur)
	}
	check("after the rerun", third)
	validate("after the old keys were dropped")
	// A credential written by the daemon now is sealed with the new key.
	apiPost(t, s, "/v1/vaults/"+vid+"/credentials", map[string]any{"auth": map[string]any{"type": "environment_variable",
		"secret_name": "KEY_E", "secret_value": "value-E", "networking": map[string]any{"type": "unrestricted"}}})
	want["KEY_E"] = "value-E"
	check("a credential created after the rotation", third)

	// A key file others may read: rotate-key and serve refuse it.
	kf := filepath.Join(home, "vault.keys")
	os.Chmod(kf, 0o644)
	if _, errOut := run2(t, bin, env, 1, "vault", "rotate-key"); !strings.Contains(errOut, "chmod 600") {
		t.Fatalf("rotate-key on a 0644 key file: %q", errOut)
	}
	os.Chmod(kf, 0o600)
	h2 := t.TempDir()
	os.WriteFile(filepath.Join(h2, "vault.keys"), []byte(`{}`), 0o640)
	if _, errOut := run2(t, bin, cleanEnv(), 1, "serve", "--home", h2, "--listen", freePort(t)); !strings.Contains(errOut, "vault key file") || !strings.Contains(errOut, "0640") {
		t.Fatalf("serve with a 0640 key file: %q", errOut)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func storeList(tenant, vaultID string) store.ListResourcesParams {
	return store.ListResourcesParams{TenantID: tenant, VaultID: vaultID, IncludeArchived: true}
}

// TestVaultRotateKeySessionResources: a session's github_repository token
// is sealed with the vault keyring, so `vault rotate-key --drop-old`
// re-seals it with the credentials; after the old key is gone the token
// still opens as internal/resources opens it for a clone.
func TestVaultRotateKeySessionResources(t *testing.T) {
	bin := staticBinary(t)
	home := t.TempDir()
	s := startServer(t, bin, home, freePort(t))
	defer s.stop(t)
	first, _ := keyFileIDs(t, home)

	ag := apiPost(t, s, "/v1/agents", map[string]any{"name": "rot", "model": "claude-sonnet-4-5"})
	envr := apiPost(t, s, "/v1/environments", map[string]any{"name": "rot"})
	sess := apiPost(t, s, "/v1/sessions", map[string]any{"agent": ag["id"], "environment_id": envr["id"],
		"resources": []any{map[string]any{"type": "github_repository", "url": "https://github.com/o/r",
			"authorization_token": "ghp-rotate-SECRET"}}})
	res := sess["resources"].([]any)[0].(map[string]any)
	rid := res["id"].(string)

	token := func(when string) (string, error) {
		t.Helper()
		ctx := context.Background()
		st, err := sqlite.Open(ctx, filepath.Join(home, "state.db"))
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		keys, err := vault.OpenKeyring(filepath.Join(home, "vault.keys"))
		if err != nil {
			t.Fatal(err)
		}
		r, err := st.GetSessionResource(ctx, rid)
		if err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		// As resources.Service.token opens it.
		b, err := keys.Open(r.TenantID, r.ID, r.KeyID, r.Secret)
		return string(b), err
	}
	if tok, err := token("before"); err != nil || tok != "ghp-rotate-SECRET" {
		t.Fatalf("before the rotation the token opens to %q, %v", tok, err)
	}

	out := run(t, bin, s.env(), 0, "vault", "rotate-key", "--drop-old")
	cur, keys := keyFileIDs(t, home)
	if cur == first || len(keys) != 1 || !strings.Contains(out, "re-encrypted 1 session resource tokens with key "+cur) {
		t.Fatalf("rotate-key --drop-old: %q; keys %v", out, keys)
	}
	if tok, err := token("after the old key was dropped"); err != nil || tok != "ghp-rotate-SECRET" {
		t.Fatalf("after rotate-key --drop-old the repository token opens to %q, %v; want the token (key %s dropped)", tok, err, first)
	}
}
