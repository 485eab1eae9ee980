package egress

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestLoadOrCreateCA(t *testing.T) {
	dir := t.TempDir()
	ca, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	for file, mode := range map[string]os.FileMode{CACertFile: 0o644, CAKeyFile: 0o600} {
		fi, err := os.Stat(filepath.Join(dir, file))
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v mode %v, want %v", file, err, fi.Mode().Perm(), mode)
		}
	}
	if cn := ca.Certificate().Subject.CommonName; !strings.HasPrefix(cn, "agentkernel egress CA ") || !ca.Certificate().IsCA {
		t.Errorf("CA subject %q, IsCA %v", cn, ca.Certificate().IsCA)
	}
	again, err := LoadOrCreateCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	if string(again.CertPEM()) != string(ca.CertPEM()) {
		t.Error("a second load made a new CA")
	}

	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.CertPEM())
	for _, host := range []string{"api.example.com", "127.0.0.1", "::1"} {
		leaf, err := again.Leaf(host)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := leaf.Leaf.Verify(x509.VerifyOptions{DNSName: host, Roots: roots}); err != nil {
			t.Errorf("leaf for %s does not verify against the CA of the first load: %v", host, err)
		}
	}
}

func TestCAKeyFileChecked(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadOrCreateCA(dir); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(dir, CAKeyFile)
	if err := os.Chmod(key, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateCA(dir); err == nil || !strings.Contains(err.Error(), "0600") {
		t.Errorf("a world-readable key loads: %v", err)
	}
	os.Chmod(key, 0o600)
	if os.Getuid() == 0 {
		if err := os.Chown(key, 12345, 12345); err != nil {
			t.Fatal(err)
		}
		if _, err := LoadOrCreateCA(dir); err == nil || !strings.Contains(err.Error(), "owned by uid 12345") {
			t.Errorf("a key owned by someone else loads: %v", err)
		}
		os.Chown(key, 0, 0)
	}
	// A certificate that is not the key's is refused, not silently used.
	other := t.TempDir()
	if _, err := LoadOrCreateCA(other); err != nil {
		t.Fatal(err)
	}
	data, _ := os.ReadFile(filepath.Join(other, CACertFile))
	os.WriteFile(filepath.Join(dir, CACertFile), data, 0o644)
	if _, err := LoadOrCreateCA(dir); err == nil || !strings.Contains(err.Error(), "does not belong") {
		t.Errorf("a foreign certificate loads: %v", err)
	}
}

// Leaves are cached, and replaced before they expire.
func TestLeafRenewed(t *testing.T) {
	ca, err := LoadOrCreateCA(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	ca.now = func() time.Time { return now }
	a, _ := ca.Leaf("api.example.com")
	b, _ := ca.Leaf("API.example.com")
	if a != b {
		t.Error("the leaf was not cached")
	}
	now = now.Add(leafValidity - leafRenew + time.Minute)
	c, _ := ca.Leaf("api.example.com")
	if c == a || !c.Leaf.NotAfter.After(a.Leaf.NotAfter) {
		t.Error("a leaf near expiry was not renewed")
	}
}
