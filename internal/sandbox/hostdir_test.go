package sandbox_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/process"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// The run dir holds the guests' sockets and logs, which the daemon trusts:
// the daemon refuses to start on one that another user could reach or swap
// (as when someone else created /tmp/agentkernel-<uid> first).
func TestManagerRefusesARunDirOthersCanReach(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to chown to another user")
	}
	ctx := context.Background()
	home := t.TempDir()
	st, err := sqlite.Open(ctx, filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	blobs, err := fsblob.Open(ctx, filepath.Join(home, "blobs"), fsblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	drv, err := process.New(process.Config{})
	if err != nil {
		t.Fatal(err)
	}
	newManager := func(run string) error {
		m, err := sandbox.NewManager(sandbox.ManagerConfig{Store: st, Blobs: blobs, Drivers: map[string]sandbox.Driver{"process": drv},
			GuestBinary: "/bin/true", DataDir: filepath.Join(home, "sandboxes"), RunDir: run})
		if err == nil {
			m.Close()
		}
		return err
	}
	base := t.TempDir()
	mk := func(name string, mode os.FileMode, uid int) string {
		p := filepath.Join(base, name)
		if err := os.MkdirAll(p, 0o700); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chown(p, uid, uid)
		return p
	}
	for name, tc := range map[string]struct {
		run  string
		want string
	}{
		"group and other may enter": {mk("open", 0o755, 0), "must be 0700"},
		"another user's":            {mk("theirs", 0o700, 65534), "owned by uid 65534"},
		"symlink":                   {func() string { p := filepath.Join(base, "link"); os.Symlink(mk("target", 0o700, 0), p); return p }(), "symlink"},
		"parent others may write":   {filepath.Join(mk("shared", 0o777, 0), "run"), "chmod go-w"},
		"parent of another user":    {filepath.Join(mk("agentkernel-0", 0o755, 65534), "abc"), "owned by uid 65534"},
	} {
		t.Run(name, func(t *testing.T) {
			err := newManager(tc.run)
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "run dir") {
				t.Fatalf("NewManager(run dir %s) = %v, want an error saying %q", tc.run, err, tc.want)
			}
		})
	}
	// A fresh path under a safe parent is created private.
	fresh := filepath.Join(base, "fresh", "run")
	if err := newManager(fresh); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(fresh); err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("fresh run dir: %v %v", fi.Mode(), err)
	}
}
