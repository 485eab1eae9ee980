package resources

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMountPathRules(t *testing.T) {
	for _, p := range []string{"/workspace/a", "/mnt/session/uploads/x", "/data/in.csv", "/mnt/other/y", "/tmp/x"} {
		if err := checkMountPath("mount_path", p); err != nil {
			t.Errorf("%q refused: %v", p, err)
		}
	}
	for p, why := range map[string]string{
		"": "empty", "a/b": "absolute", "/a/../b": "..", "/a/./b": ".", "/a//b": "clean", "/a/": "clean", "/": "needs",
		"/mnt/session": "daemon makes", "/mnt/session/uploads": "daemon makes",
		"/proc/1": "/proc", "/dev/x": "/dev", "/sys": "/sys", "/.agentkernel/guest": "/.agentkernel", "/etc/passwd": "/etc",
		"/mnt/session/outputs": "outputs", "/mnt/session/outputs/a": "outputs", "/mnt/memory/x": "memory", "/mnt/.links/x": "/mnt/.links",
		"/mnt/.staging/x": "/mnt/.staging", "/workspace": "needs", "/mnt": "needs", "/a\x00b": "NUL", "/" + strings.Repeat("a", 1100): "limit",
	} {
		err := checkMountPath("resources[0].mount_path", p)
		var ie *InputError
		if !errors.As(err, &ie) || ie.Field != "resources[0].mount_path" || !strings.Contains(err.Error(), why) {
			t.Errorf("%q: %v; want a 400 naming the field and %q", p, err, why)
		}
	}
}

func TestBranchRules(t *testing.T) {
	for _, b := range []string{"main", "release/1.2", "feature-x_y"} {
		if err := checkBranch("name", b); err != nil {
			t.Errorf("%q refused: %v", b, err)
		}
	}
	for _, b := range []string{"", "-c", "--upload-pack=x", "a..b", "a b", "a~1", "a:b", "x.lock", "/a", "a/", "a@{1}", "a\\b"} {
		if checkBranch("name", b) == nil {
			t.Errorf("%q accepted", b)
		}
	}
}

// TestCloneUsesHTTPOnly: git runs with only the URL's http(s) protocol
// allowed, so neither file:// nor ext:: (which runs a command) reaches a
// clone even if a URL got past the API's check.
func TestCloneUsesHTTPOnly(t *testing.T) {
	src := t.TempDir()
	s := New(Config{})
	for _, u := range []string{"file://" + src, "ext::sh -c touch% " + filepath.Join(src, "pwned")} {
		err := s.clone(context.Background(), repoDoc{URL: u}, "", filepath.Join(t.TempDir(), "c"))
		if err == nil {
			t.Errorf("clone %q succeeded", u)
		}
	}
	if _, err := os.Stat(filepath.Join(src, "pwned")); err == nil {
		t.Fatal("ext:: ran its command")
	}
}
