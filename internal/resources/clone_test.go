package resources

import (
	"context"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/egress"
)

// fakeResolver answers every name with the same addresses.
type fakeResolver []netip.Addr

func (f fakeResolver) LookupNetIP(ctx context.Context, network, host string) ([]netip.Addr, error) {
	return f, nil
}

// TestCloneRefusesTheDaemonsNetworks: a repository URL is the API
// caller's, and the daemon clones it: loopback, link-local and private
// addresses — named, literal or resolved — are refused unless the
// operator lists the host in [resources] git_internal_hosts.
func TestCloneRefusesTheDaemonsNetworks(t *testing.T) {
	private := fakeResolver{netip.MustParseAddr("10.1.2.3")}
	public := fakeResolver{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("2606:2800:220:1::1")}
	for _, c := range []struct {
		url string
		r   fakeResolver
	}{
		{"http://127.0.0.1:9418/r.git", public},
		{"http://localhost/r.git", public},
		{"http://169.254.169.254/latest/meta-data", public},
		{"https://[::1]/r.git", public},
		{"https://git.example.com/r.git", private},
		{"https://git.example.com/r.git", fakeResolver{netip.MustParseAddr("93.184.216.34"), netip.MustParseAddr("192.168.1.1")}},
	} {
		s := New(Config{Resolver: c.r})
		err := s.clone(context.Background(), repoDoc{URL: c.url}, "", filepath.Join(t.TempDir(), "c"))
		if err == nil || !strings.Contains(err.Error(), "git_internal_hosts") {
			t.Errorf("clone %s (resolving to %v): %v, want a refusal naming [resources] git_internal_hosts", c.url, c.r, err)
		}
	}
	// A public host is cloned from the addresses that were checked.
	u, _ := url.Parse("https://git.example.com/r.git")
	pin, err := New(Config{Resolver: public}).repositoryAddrs(context.Background(), u)
	if want := "git.example.com:443:93.184.216.34,[2606:2800:220:1::1]"; err != nil || pin != want {
		t.Errorf("pin %q, %v; want %q", pin, err, want)
	}
}

// TestCloneFromAnAllowedInternalHostUsesThePinnedAddress: a name the
// operator allowed is cloned from the address it resolved to when it was
// checked — git is handed that address (http.curloptResolve) and does not
// look the name up again (here it could not: the name exists only in the
// test's resolver).
func TestCloneFromAnAllowedInternalHostUsesThePinnedAddress(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	root := t.TempDir()
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(git, args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t",
			"GIT_COMMITTER_EMAIL=t@example.com", "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v: %s", args, err, out)
		}
	}
	work := filepath.Join(root, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	run(work, "init", "-q", "-b", "main")
	if err := os.WriteFile(filepath.Join(work, "README"), []byte("pinned\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(work, "add", "README")
	run(work, "commit", "-q", "-m", "one")
	run(root, "clone", "-q", "--bare", work, filepath.Join(root, "srv", "r.git"))
	run(filepath.Join(root, "srv", "r.git"), "update-server-info")
	srv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(root, "srv"))))
	defer srv.Close()
	_, port, _ := net.SplitHostPort(strings.TrimPrefix(srv.URL, "http://"))
	repo := "http://repo.agentkernel.test:" + port + "/r.git"

	dst := filepath.Join(t.TempDir(), "c")
	err = New(Config{Resolver: fakeResolver{netip.MustParseAddr("127.0.0.1")}}).clone(context.Background(), repoDoc{URL: repo}, "", dst)
	if err == nil || !strings.Contains(err.Error(), "git_internal_hosts") {
		t.Fatalf("clone of a name resolving to loopback, not allowed: %v", err)
	}
	allowed, err := egress.ParseHosts([]string{"repo.agentkernel.test:" + port})
	if err != nil {
		t.Fatal(err)
	}
	s := New(Config{Resolver: fakeResolver{netip.MustParseAddr("127.0.0.1")}, GitInternalHosts: allowed})
	if err := s.clone(context.Background(), repoDoc{URL: repo}, "", dst); err != nil {
		t.Fatalf("clone from an allowed internal host: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dst, "README")); err != nil || string(b) != "pinned\n" {
		t.Fatalf("cloned README %q, %v", b, err)
	}
}
