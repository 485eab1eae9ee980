package cli_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// oneWord fails unless out is a single line holding one word with prefix,
// as `$(…)` needs it; it returns the word.
func oneWord(t *testing.T, what, out, prefix string) string {
	t.Helper()
	s := strings.TrimSuffix(out, "\n")
	if !strings.HasPrefix(s, prefix) || strings.ContainsAny(s, " \t\n") {
		t.Fatalf("%s printed %q on stdout; want one %s… word alone", what, out, prefix)
	}
	return s
}

// TestCreateVerbsPrintWhatScriptsNeed: the README's next lines capture
// what a create verb prints with $(…): the id alone on stdout (the secret,
// for key create), people's prose on stderr, everything with --json.
func TestCreateVerbsPrintWhatScriptsNeed(t *testing.T) {
	bin := binary(t)
	home := t.TempDir()
	s := startServer(t, bin, home, freePort(t))
	defer s.stop(t)
	env := s.env()

	out, stderr := run2(t, bin, env, 0, "tenant", "create", "acme")
	tenant := oneWord(t, "tenant create", out, "tnt_")
	if !strings.Contains(stderr, "acme") {
		t.Errorf("tenant create says nothing for people: %q", stderr)
	}

	out, stderr = run2(t, bin, env, 0, "key", "create", "--name", "ci", "--tenant", tenant)
	secret := oneWord(t, "key create", out, "ak_")
	if !strings.Contains(stderr, "key_") || !strings.Contains(stderr, "only once") {
		t.Errorf("key create's stderr lacks the key id or the warning: %q", stderr)
	}
	// The captured secret is a working key of that tenant.
	tenantEnv := append(cleanEnv("AGENTKERNEL_URL=http://"+s.addr, "HOME="+t.TempDir()), "AGENTKERNEL_API_KEY="+secret)
	if out := run(t, bin, tenantEnv, 0, "sandbox", "ls", "--json"); strings.TrimSpace(out) != "[]" && strings.TrimSpace(out) != "null" {
		t.Errorf("the new tenant sees sandboxes: %q", out)
	}
	var k struct {
		ID       string `json:"id"`
		TenantID string `json:"tenant_id"`
		Secret   string `json:"secret"`
	}
	out = run(t, bin, env, 0, "key", "create", "--name", "ci2", "--tenant", tenant, "--json")
	if err := json.Unmarshal([]byte(out), &k); err != nil || !strings.HasPrefix(k.ID, "key_") || k.TenantID != tenant || !strings.HasPrefix(k.Secret, "ak_") {
		t.Errorf("key create --json: %v %q", err, out)
	}
	// An environment key: made with a tenant key, for a self_hosted
	// environment of the tenant; it reaches that environment's queue only.
	envID := oneWord(t, "env create --self-hosted", run(t, bin, tenantEnv, 0, "env", "create", "--name", "workers", "--self-hosted"), "env_")
	out, stderr = run2(t, bin, tenantEnv, 0, "key", "create", "--name", "worker", "--environment", envID)
	envSecret := oneWord(t, "key create --environment", out, "ak_")
	if !strings.Contains(stderr, "environment "+envID) {
		t.Errorf("key create --environment does not name the environment: %q", stderr)
	}
	workerEnv := append(cleanEnv("AGENTKERNEL_URL=http://"+s.addr, "HOME="+t.TempDir()), "AGENTKERNEL_API_KEY="+envSecret)
	if _, stderr := run2(t, bin, workerEnv, 1, "sandbox", "ls"); !strings.Contains(stderr, "environment key") {
		t.Errorf("an environment key lists sandboxes: %q", stderr)
	}
	var tn struct{ ID, Name string }
	out = run(t, bin, env, 0, "tenant", "create", "globex", "--json")
	if err := json.Unmarshal([]byte(out), &tn); err != nil || !strings.HasPrefix(tn.ID, "tnt_") || tn.Name != "globex" {
		t.Errorf("tenant create --json: %v %q", err, out)
	}

	// The other create verbs follow the same rule.
	sb := oneWord(t, "sandbox create", run(t, bin, env, 0, "sandbox", "create"), "sbx_")
	defer run(t, bin, env, 0, "sandbox", "rm", sb)
	oneWord(t, "sandbox snapshot", run(t, bin, env, 0, "sandbox", "snapshot", sb), "bkp_")
	class := filepath.Join(t.TempDir(), "class.json")
	if err := os.WriteFile(class, []byte(`{"class": "counter", "init_command": ["/bin/true"]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _ = run2(t, bin, env, 0, "object", "define", class)
	oneWord(t, "object define", out, "counter")
	oneWord(t, "ticket create", run(t, bin, env, 0, "ticket", "create", "a title"), "tkt_")
}
