package agentkernel_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// filesSandbox creates a process sandbox that the test deletes at the end
// (through the API, so a workspace that cannot be snapshotted fails it).
func filesSandbox(t *testing.T, d *daemontest.Daemon) (*agentkernel.Client, *agentkernel.Sandbox) {
	t.Helper()
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := c.Sandboxes.Create(context.Background(), agentkernel.SandboxCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if _, err := c.Sandboxes.Delete(context.Background(), sb.ID); err != nil {
			t.Errorf("delete sandbox: %v", err)
		}
	})
	return c, sb
}

// TestSandboxFilesPathForms: a relative path is relative to /workspace; an
// absolute one (leading slash URL-encoded) names that path in the sandbox.
// Both forms name the same workspace file, and /tmp is reachable too.
func TestSandboxFilesPathForms(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t)
	c, sb := filesSandbox(t, d)
	files := d.URL + "/v1/sandboxes/" + sb.ID + "/files/"

	if code, body := call(t, "PUT", files+"%2Fworkspace%2Fabs.txt", d.AdminKey, "absolute"); code != 201 || body["path"] != "/workspace/abs.txt" {
		t.Fatalf("absolute write: %d %v", code, body)
	}
	if b, err := c.Sandboxes.ReadFile(ctx, sb.ID, "abs.txt"); err != nil || string(b) != "absolute" {
		t.Fatalf("relative read of an absolute write: %q %v", b, err)
	}
	if code, body := call(t, "PUT", files+"dir/rel.txt", d.AdminKey, "relative"); code != 201 || body["path"] != "/workspace/dir/rel.txt" {
		t.Fatalf("relative write: %d %v", code, body)
	}
	if b, err := c.Sandboxes.ReadFile(ctx, sb.ID, "/workspace/dir/rel.txt"); err != nil || string(b) != "relative" {
		t.Fatalf("absolute read of a relative write: %q %v", b, err)
	}
	if err := c.Sandboxes.WriteFile(ctx, sb.ID, "/tmp/scratch", strings.NewReader("in tmp"), 0); err != nil {
		t.Fatal(err)
	}
	res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: "cat /tmp/scratch"})
	if err != nil || res.Stdout != "in tmp" {
		t.Fatalf("exec sees the /tmp write: %+v %v", res, err)
	}
}

// TestSandboxFilesErrorsAre4xx: every way a caller's path can fail is a
// 4xx that names the problem, never a 500, and nothing hangs on a pipe or
// streams a device forever.
func TestSandboxFilesErrorsAre4xx(t *testing.T) {
	ctx := context.Background()
	d := daemontest.Start(t, func(c *config.Config) { c.Sandbox.MaxFileBytes = 1 << 20 })
	c, sb := filesSandbox(t, d)
	setup := `set -e
echo hi > file.txt
mkdir dir locked
chmod 500 locked
mkfifo pipe
ln -s loop-a loop-b && ln -s loop-b loop-a
ln -s /tmp/loop-d /tmp/loop-c && ln -s /tmp/loop-c /tmp/loop-d
ln -s pipe pipe-link
truncate -s 8M big
ln -s big big-link`
	if res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: setup}); err != nil || res.ExitCode != 0 {
		t.Fatalf("setup: %+v %v", res, err)
	}
	files := d.URL + "/v1/sandboxes/" + sb.ID + "/files/"
	long := strings.Repeat("a", 5000)
	deep := strings.Repeat(strings.Repeat("d", 200)+"/", 21) + "f"
	for _, tc := range []struct {
		method, path string
		status       int
		errType      string
		mentions     []string
	}{
		{"PUT", long, 400, "invalid_request_error", []string{"255", "NAME_MAX"}},
		{"GET", long, 400, "invalid_request_error", []string{"255"}},
		{"PUT", strings.Repeat("b", 256), 400, "invalid_request_error", []string{"256 bytes", "255"}},
		{"PUT", deep, 400, "invalid_request_error", []string{"4095", "PATH_MAX"}},
		{"PUT", "%2Fetc%2Fx", 403, "permission_error", []string{"/etc/x", "not writable", "read-only"}},
		{"PUT", "%2Fusr%2Fbin%2Fagentkernel-test", 403, "permission_error", []string{"not writable"}},
		{"PUT", "locked/x", 403, "permission_error", []string{"/workspace/locked/x", "permission denied"}},
		{"PUT", "file.txt/child", 409, "conflict_error", []string{"/workspace/file.txt/child", "not a directory"}},
		{"GET", "file.txt/child", 409, "conflict_error", []string{"not a directory"}},
		{"PUT", "dir", 409, "conflict_error", []string{"/workspace/dir", "is a directory"}},
		{"GET", "loop-a", 400, "invalid_request_error", []string{"symbolic links"}},
		{"PUT", "loop-a", 400, "invalid_request_error", []string{"symbolic links"}},
		{"GET", "%2Ftmp%2Floop-c", 400, "invalid_request_error", []string{"/tmp/loop-c", "symbolic links"}},
		{"GET", "pipe", 400, "invalid_request_error", []string{"/workspace/pipe", "not a regular file"}},
		{"GET", "pipe-link", 400, "invalid_request_error", []string{"not a regular file"}},
		{"PUT", "pipe", 400, "invalid_request_error", []string{"not a regular file"}},
		{"PUT", "pipe-link", 400, "invalid_request_error", []string{"not a regular file"}},
		{"GET", "%2Fdev%2Fzero", 400, "invalid_request_error", []string{"/dev/zero", "not a regular file"}},
		{"GET", "big", 413, "request_too_large", []string{"max_file_bytes"}},
		{"GET", "big-link", 413, "request_too_large", []string{"max_file_bytes"}},
		{"GET", "a%00b", 400, "invalid_request_error", []string{"NUL"}},
		{"GET", "missing.txt", 404, "not_found_error", []string{"/workspace/missing.txt"}},
		{"DELETE", "dir%2F..%2F..", 400, "invalid_request_error", []string{".."}},
		{"DELETE", "%2Fworkspace", 400, "invalid_request_error", []string{"/workspace"}},
		{"DELETE", "%2Fetc%2Fpasswd", 403, "permission_error", []string{"/etc/passwd"}},
		{"DELETE", "dir?recursive=maybe", 400, "invalid_request_error", []string{`"recursive"`}},
		{"PUT", "x.txt?colour=red", 400, "invalid_request_error", []string{`"colour"`}},
		{"PUT", "x.txt?mode=999", 400, "invalid_request_error", []string{`"mode"`}},
		// A path the router would clean is refused, not redirected (a
		// client following the redirect would write another file).
		{"PUT", "/tmp/x", 400, "invalid_request_error", []string{"%2F"}},
		{"PUT", "a/./b", 400, "invalid_request_error", []string{`"."`}},
		{"DELETE", "a/../../b", 400, "invalid_request_error", []string{`".."`}},
	} {
		data := "data"
		if tc.method != "PUT" {
			data = ""
		}
		code, body := call(t, tc.method, files+tc.path, d.AdminKey, data)
		typ, msg := errType(body)
		if code != tc.status || typ != tc.errType {
			t.Errorf("%s %.60s: %d %s %q, want %d %s", tc.method, tc.path, code, typ, msg, tc.status, tc.errType)
			continue
		}
		for _, m := range tc.mentions {
			if !strings.Contains(msg, m) {
				t.Errorf("%s %.60s: message %q does not mention %q", tc.method, tc.path, msg, m)
			}
		}
	}
	// The longest name a file system takes is written like any other (the
	// atomic write's temp name does not grow with it).
	name := strings.Repeat("n", 255)
	if code, body := call(t, "PUT", files+name, d.AdminKey, "max"); code != 201 {
		t.Fatalf("a 255-byte name: %d %v", code, body)
	}
	resp, err := http.DefaultClient.Do(mustRequest(t, "GET", files+name, d.AdminKey))
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(b) != "max" {
		t.Fatalf("read back the 255-byte name: %d %q", resp.StatusCode, b)
	}
	// A file that exists inside the sandbox but is not regular keeps its
	// kind: the refused write did not replace the pipe.
	// (The pipe is removed afterwards: a workspace snapshot skips pipes and
	// then fails its own verification, so the sandbox could not be deleted.)
	res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: "test -p pipe && rm pipe && ls -A | grep -c agentkernel-tmp || true"})
	if err != nil || res.Stdout != "0\n" {
		t.Fatalf("after the refused writes: %+v %v", res, err)
	}
}

func mustRequest(t *testing.T, method, url, key string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("x-api-key", key)
	return req
}

// TestSandboxFilesFullDisk: a write that does not fit is a 507 that says
// the sandbox's disk is full, and leaves no temp file behind. The full
// disk is real: a 512 KiB tmpfs mounted over the sandbox's workspace,
// which needs root.
func TestSandboxFilesFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs over a workspace needs root")
	}
	ctx := context.Background()
	d := daemontest.Start(t)
	c := agentkernel.New(agentkernel.WithBaseURL(d.URL), agentkernel.WithAPIKey(d.AdminKey))
	sb, err := c.Sandboxes.Create(ctx, agentkernel.SandboxCreateParams{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Sandboxes.Stop(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	// The mount is a directory of the workspace, so the workspace itself
	// (and the runtime's stamp in it) stays as it was across the restart.
	ws := filepath.Join(d.Sandboxes().WorkspaceDir(sb.ID), "small")
	if err := os.Mkdir(ws, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", ws, "tmpfs", 0, "size=512k"); err != nil {
		t.Fatalf("mount a tmpfs on %s: %v", ws, err)
	}
	// Cleanups run last first: the mount goes, then the sandbox is deleted
	// (its final snapshot never crosses into another filesystem).
	t.Cleanup(func() {
		if _, err := c.Sandboxes.Delete(context.Background(), sb.ID); err != nil {
			t.Errorf("delete sandbox: %v", err)
		}
	})
	t.Cleanup(func() {
		if err := syscall.Unmount(ws, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", ws, err)
		}
	})
	if _, err := c.Sandboxes.Start(ctx, sb.ID); err != nil {
		t.Fatal(err)
	}
	code, body := call(t, "PUT", d.URL+"/v1/sandboxes/"+sb.ID+"/files/small/big", d.AdminKey, strings.Repeat("x", 1<<20))
	if typ, msg := errType(body); code != 507 || !strings.Contains(msg, "/workspace/small/big") || !strings.Contains(msg, "no space left") {
		t.Fatalf("write to a full disk: %d %s %q", code, typ, msg)
	}
	res, err := c.Sandboxes.Exec(ctx, sb.ID, agentkernel.ExecParams{Command: "df -k small | tail -1; ls -A small | grep -c agentkernel-tmp || true"})
	if err != nil || !strings.HasSuffix(res.Stdout, "\n0\n") || !strings.Contains(res.Stdout, "512") {
		t.Fatalf("temp files after the failed write: %+v %v", res, err)
	}
}
