package vault_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
	"github.com/agentkernel/agentkernel/internal/vault"
)

func newService(t testing.TB, now func() time.Time) (*vault.Service, store.Store, *vault.Keyring) {
	t.Helper()
	dir := t.TempDir()
	st, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	keys, err := vault.OpenKeyring(filepath.Join(dir, "vault.keys"))
	if err != nil {
		t.Fatal(err)
	}
	return vault.New(vault.Config{Store: st, Keys: keys, Now: now}), st, keys
}

func TestSealIsBoundToItsRow(t *testing.T) {
	_, _, keys := newService(t, nil)
	sealed, keyID, err := keys.Seal("tnt_a", "vcrd_1", []byte("s3cret"))
	if err != nil {
		t.Fatal(err)
	}
	if bytes.Contains(sealed, []byte("s3cret")) {
		t.Fatal("the sealed bytes hold the plaintext")
	}
	if got, err := keys.Open("tnt_a", "vcrd_1", keyID, sealed); err != nil || string(got) != "s3cret" {
		t.Fatalf("open: %q %v", got, err)
	}
	for _, c := range [][2]string{{"tnt_a", "vcrd_2"}, {"tnt_b", "vcrd_1"}} {
		if _, err := keys.Open(c[0], c[1], keyID, sealed); err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Fatalf("a ciphertext moved to %v opened (or the error shows it): %v", c, err)
		}
	}
	if _, err := keys.Open("tnt_a", "vcrd_1", "vkey_unknown", sealed); err == nil || !strings.Contains(err.Error(), "vkey_unknown") {
		t.Fatalf("an unknown key: %v", err)
	}
}

func TestKeyFileOthersMayReadIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "vault.keys")
	if _, err := vault.OpenKeyring(path); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Stat(path); fi.Mode().Perm() != 0o600 {
		t.Fatalf("created with mode %v", fi.Mode())
	}
	os.Chmod(path, 0o604)
	if _, err := vault.OpenKeyring(path); err == nil || !strings.Contains(err.Error(), "chmod 600") {
		t.Fatalf("a world-readable key file: %v", err)
	}
}

func TestSecretsNeverPrint(t *testing.T) {
	s := vault.Secrets{Token: "tok-SECRET", Value: "val-SECRET"}
	var logged bytes.Buffer
	slog.New(slog.NewTextHandler(&logged, nil)).Info("x", "secrets", s)
	_, jerr := json.Marshal(s)
	for _, out := range []string{fmt.Sprint(s), fmt.Sprintf("%v %+v %#v %s", s, s, s, s), logged.String(), fmt.Sprint(jerr)} {
		if strings.Contains(out, "SECRET") {
			t.Fatalf("a secret printed: %s", out)
		}
	}
	if jerr == nil {
		t.Fatal("json.Marshal of secrets worked")
	}
}

// TestRefreshMargin: with a fake clock, a token is refreshed only once it
// is within the margin of its expiry, and a failure names the endpoint and
// the OAuth error but no token.
func TestRefreshMargin(t *testing.T) {
	ctx := context.Background()
	var now atomic.Pointer[time.Time]
	start := time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)
	now.Store(&start)
	svc, st, _ := newService(t, func() time.Time { return *now.Load() })
	var calls atomic.Int64
	var refuse atomic.Bool
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		_ = r.ParseForm()
		w.Header().Set("Content-Type", "application/json")
		if refuse.Load() || r.Form.Get("client_id") != "cid" || r.Form.Get("client_secret") != "" {
			w.WriteHeader(400)
			fmt.Fprintf(w, `{"error":"invalid_grant","refresh_token":%q}`, r.Form.Get("refresh_token"))
			return
		}
		fmt.Fprint(w, `{"access_token":"new-access","expires_in":600}`)
	}))
	defer ep.Close()
	if _, err := st.CreateVault(ctx, &store.Vault{ID: "vlt_1", TenantID: "tnt"}); err != nil {
		t.Fatal(err)
	}
	exp := start.Add(10 * time.Minute)
	c, err := svc.Create(ctx, "tnt", "vlt_1", vault.Doc{Auth: vault.Auth{Type: vault.KindMCPOAuth, MCPServerURL: "https://m.example.com",
		ExpiresAt: &exp, Refresh: &vault.Refresh{TokenEndpoint: ep.URL, ClientID: "cid", TokenEndpointAuth: vault.AuthNone}}},
		vault.Secrets{AccessToken: "old-access", RefreshToken: "rt-SECRET"})
	if err != nil {
		t.Fatal(err)
	}
	tok := func() (string, error) {
		return svc.MCPAuthorization(ctx, "tnt", []string{"vlt_1"}, "https://m.example.com/")
	}
	if got, err := tok(); err != nil || got != "old-access" || calls.Load() != 0 {
		t.Fatalf("10 minutes before expiry: %q %v (%d calls)", got, err, calls.Load())
	}
	later := start.Add(5*time.Minute + time.Second) // 4m59s left: within the margin
	now.Store(&later)
	if got, err := tok(); err != nil || got != "new-access" || calls.Load() != 1 {
		t.Fatalf("within the margin: %q %v (%d calls)", got, err, calls.Load())
	}
	stored, _ := st.GetVaultCredential(ctx, c.ID)
	d, _ := vault.DecodeDoc(stored)
	if want := later.Add(10 * time.Minute); d.Auth.ExpiresAt == nil || !d.Auth.ExpiresAt.Equal(want) {
		t.Fatalf("stored expiry %v, want %v", d.Auth.ExpiresAt, want)
	}
	if sec, _ := svc.Secrets(stored); sec.RefreshToken != "rt-SECRET" {
		t.Fatal("a refresh without a rotated refresh token lost the stored one")
	}
	refuse.Store(true)
	end := later.Add(9 * time.Minute)
	now.Store(&end)
	_, err = tok()
	var re *vault.RefreshError
	if err == nil || !strings.Contains(err.Error(), "invalid_grant") || !strings.Contains(err.Error(), ep.URL) || strings.Contains(err.Error(), "SECRET") {
		t.Fatalf("a refused refresh: %v", err)
	}
	if !asRefreshError(err, &re) || re.HTTP == nil || strings.Contains(re.HTTP.Body, "rt-SECRET") || !strings.Contains(re.HTTP.Body, "[redacted]") {
		t.Fatalf("the captured answer is not scrubbed: %+v", re)
	}
}

func asRefreshError(err error, re **vault.RefreshError) bool {
	e, ok := err.(*vault.RefreshError)
	*re = e
	return ok
}

// BenchmarkCredentialCreate: sealing and storing one credential (SQLite).
func BenchmarkCredentialCreate(b *testing.B) {
	ctx := context.Background()
	svc, st, _ := newService(b, nil)
	if _, err := st.CreateVault(ctx, &store.Vault{ID: "vlt_b", TenantID: "tnt"}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		if _, err := svc.Create(ctx, "tnt", "vlt_b", vault.Doc{Auth: vault.Auth{Type: vault.KindEnvVar, SecretName: fmt.Sprintf("K%d", i),
			Networking: &vault.Networking{Type: "limited", AllowedHosts: []string{"api.example.com"}}}}, vault.Secrets{Value: strings.Repeat("v", 64)}); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkEnvCredentials: resolving a session's N environment_variable
// credentials (list, decode, open each, parse hosts) as the egress
// resolver does per connection.
func BenchmarkEnvCredentials(b *testing.B) {
	for _, n := range []int{1, 10, 100} {
		b.Run(fmt.Sprintf("N=%d", n), func(b *testing.B) {
			ctx := context.Background()
			svc, st, _ := newService(b, nil)
			if _, err := st.CreateVault(ctx, &store.Vault{ID: "vlt_b", TenantID: "tnt"}); err != nil {
				b.Fatal(err)
			}
			for i := range n {
				if _, err := svc.Create(ctx, "tnt", "vlt_b", vault.Doc{Auth: vault.Auth{Type: vault.KindEnvVar, SecretName: fmt.Sprintf("K%d", i),
					Networking: &vault.Networking{Type: "limited", AllowedHosts: []string{"api.example.com"}}}}, vault.Secrets{Value: strings.Repeat("v", 64)}); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for b.Loop() {
				creds, err := svc.EnvCredentials(ctx, "tnt", []string{"vlt_b"})
				if err != nil || len(creds) != n {
					b.Fatal(len(creds), err)
				}
			}
		})
	}
}

// A refresh the token endpoint refuses, or that cannot reach it, is
// announced (vault_credential.refresh_failed, naming the credential and its
// vault); a successful refresh is not.
func TestRefreshFailureIsAnnounced(t *testing.T) {
	ctx := context.Background()
	svc, st, _ := newService(t, nil)
	var refuse atomic.Bool
	ep := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if refuse.Load() {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		fmt.Fprint(w, `{"access_token":"new-access","expires_in":600}`)
	}))
	defer ep.Close()
	hook, err := st.CreateWebhookEndpoint(ctx, &store.WebhookEndpoint{TenantID: "tnt", URL: "https://h.example.com",
		EventTypes: []string{store.WebhookVaultCredentialRefreshFailed}, Secret: "whsec_c2VjcmV0Cg=="})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.CreateVault(ctx, &store.Vault{ID: "vlt_1", TenantID: "tnt"}); err != nil {
		t.Fatal(err)
	}
	c, err := svc.Create(ctx, "tnt", "vlt_1", vault.Doc{Auth: vault.Auth{Type: vault.KindMCPOAuth, MCPServerURL: "https://m.example.com",
		Refresh: &vault.Refresh{TokenEndpoint: ep.URL, ClientID: "cid", TokenEndpointAuth: vault.AuthNone}}},
		vault.Secrets{AccessToken: "old-access", RefreshToken: "rt"})
	if err != nil {
		t.Fatal(err)
	}
	deliveries := func() []*store.WebhookDelivery {
		ds, err := st.ListWebhookDeliveries(ctx, store.ListWebhookDeliveriesParams{EndpointID: hook.ID})
		if err != nil {
			t.Fatal(err)
		}
		return ds
	}
	if _, _, err := svc.Refresh(ctx, c.ID, true); err != nil {
		t.Fatal(err)
	}
	if ds := deliveries(); len(ds) != 0 {
		t.Fatalf("a successful refresh was announced: %d deliveries", len(ds))
	}
	refuse.Store(true)
	if _, _, err := svc.Refresh(ctx, c.ID, true); err == nil {
		t.Fatal("a refused refresh succeeded")
	}
	ds := deliveries()
	if len(ds) != 1 || ds[0].EventType != store.WebhookVaultCredentialRefreshFailed {
		t.Fatalf("after a refused refresh: %d deliveries, want one refresh_failed", len(ds))
	}
	var body struct {
		Data map[string]string `json:"data"`
	}
	if err := json.Unmarshal(ds[0].Payload, &body); err != nil || body.Data["id"] != c.ID || body.Data["vault_id"] != "vlt_1" {
		t.Fatalf("payload %s: %v", ds[0].Payload, err)
	}
}
