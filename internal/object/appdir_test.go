package object_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/store"
)

// serveOutcome runs `agentkernel serve` on a config and reports whether it
// refused to start (with its stderr) or came up healthy (with a client; it
// is stopped, its objects deleted, at cleanup).
func serveOutcome(t *testing.T, home, cfgPath string) (started bool, stderr string, c *agentkernel.Client) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var errb bytes.Buffer
	cmd := exec.Command(agentkernelBinary(t), "serve", "--config", cfgPath, "--home", home, "--listen", addr)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTKERNEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	url := "http://" + addr
	deadline := time.NewTimer(60 * time.Second)
	defer deadline.Stop()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			return false, errb.String(), nil
		case <-deadline.C:
			cmd.Process.Kill()
			<-exited
			t.Fatalf("serve neither exited nor became healthy:\n%s", errb.String())
		case <-tick.C:
		}
		resp, err := http.Get(url + "/healthz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			continue
		}
		key, err := os.ReadFile(filepath.Join(home, "admin.key"))
		if err != nil {
			t.Fatal(err)
		}
		c := agentkernel.New(agentkernel.WithBaseURL(url), agentkernel.WithAPIKey(strings.TrimSpace(string(key))))
		t.Cleanup(func() {
			objs, _ := c.Objects.List(context.Background(), agentkernel.ObjectListParams{})
			for _, o := range objs {
				_ = c.Objects.Delete(context.Background(), o.Class, o.ID)
			}
			cmd.Process.Signal(os.Interrupt)
			<-exited
		})
		return true, "", c // stderr is still being written
	}
}

// Host directories at /app are the operator's: an [[objects]] app_dir must
// resolve (symlinks and ".." included) under durable_objects.app_roots and
// must not overlap the daemon's own files, or serve refuses to start with
// an error naming the field. The default root is the config file's
// directory, which is what the README's `object init` walkthrough uses.
func TestServeRefusesAnAppDirOutsideTheRoots(t *testing.T) {
	_, app := builds(t)
	base := t.TempDir()
	root := filepath.Join(base, "apps")
	outside := filepath.Join(base, "outside")
	for _, d := range []string{filepath.Join(root, "counter"), outside} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(app, "counter"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "counter", "counter"), b, 0o755); err != nil {
		t.Fatal(err)
	}
	run, err := os.MkdirTemp("", "akad")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })

	write := func(t *testing.T, dir, roots, appDir string) string {
		t.Helper()
		p := filepath.Join(dir, "agentkernel.toml")
		toml := fmt.Sprintf("[sandbox]\nrun_dir = %q\nguest_binary = %q\n\n[durable_objects]\n%s\n[[objects]]\nclass = \"counter\"\ninit_command = [\"/app/counter\"]\napp_dir = %q\n",
			run, agentkernelBinary(t), roots, appDir)
		if err := os.WriteFile(p, []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	rootsLine := fmt.Sprintf("app_roots = [%q]\n", root)
	for _, tc := range []struct {
		name, roots, appDir, want string
		home                      func(home string) string // app_dir from the home
	}{
		{name: "outside the roots", roots: rootsLine, appDir: outside, want: "outside every durable_objects.app_roots"},
		{name: "symlink under a root leading out", roots: rootsLine, appDir: filepath.Join(root, "link"), want: "outside every durable_objects.app_roots"},
		{name: "dotdot climbing out of a root", roots: rootsLine, appDir: root + "/counter/../../outside", want: "outside every durable_objects.app_roots"},
		{name: "no roots allowed", roots: "app_roots = []\n", appDir: filepath.Join(root, "counter"), want: "allows no host directory"},
		{name: "the daemon's home under a root", roots: fmt.Sprintf("app_roots = [%q]\n", base), want: "overlaps the daemon's own",
			home: func(home string) string { return home }},
		{name: "a root holding the home", roots: `app_roots = ["/"]` + "\n", appDir: "/", want: "overlaps the daemon's own"},
	} {
		t.Run(strings.ReplaceAll(tc.name, " ", "_"), func(t *testing.T) {
			home := filepath.Join(base, "home-"+strings.ReplaceAll(tc.name, " ", "-"))
			appDir := tc.appDir
			if tc.home != nil {
				appDir = tc.home(home)
				if err := os.MkdirAll(home, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			started, stderr, _ := serveOutcome(t, home, write(t, t.TempDir(), tc.roots, appDir))
			if started {
				t.Fatalf("serve started with app_dir %s", appDir)
			}
			if !strings.Contains(stderr, "objects[0].app_dir") || !strings.Contains(stderr, tc.want) {
				t.Fatalf("serve's error does not name objects[0].app_dir and %q:\n%s", tc.want, stderr)
			}
		})
	}

	// The walkthrough: agentkernel.toml beside the app, no app_roots.
	t.Run("beside_the_config_file", func(t *testing.T) {
		started, stderr, c := serveOutcome(t, filepath.Join(base, "home-ok"), write(t, root, "", filepath.Join(root, "counter")))
		if !started {
			t.Fatalf("serve refused an app_dir beside its config file:\n%s", stderr)
		}
		r, err := c.Objects.Call(context.Background(), "counter", "a", agentkernel.ObjectCall{Method: "increment"})
		if err != nil || sdkValue(r) != 1 {
			t.Fatalf("call: %s %v", r, err)
		}
	})
}

// A class stored through the API before host paths became the operator's
// (its row still names an app_dir) is never mounted: its objects do not
// start, and the error says how to move to a bundle.
func TestStoredAPIClassWithAppDirIsNotMounted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	if _, err := e.st.PutObjectClass(ctx, &store.ObjectClass{TenantID: "t1", Class: "legacy", InitCommand: []string{"/app/counter"}, AppDir: e.app}); err != nil {
		t.Fatal(err)
	}
	_, err := e.call(t, key("legacy", "a"), "get", nil)
	if !errors.Is(err, object.ErrSandboxUnavailable) || !strings.Contains(err.Error(), "app_dir") || !strings.Contains(err.Error(), "bundle") {
		t.Fatalf("call on a stored class with an app_dir: %v", err)
	}
}
