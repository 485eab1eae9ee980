package process

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/image"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/sandboxtest"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// staticBusybox returns the host's busybox if it is statically linked (a
// rootfs holding only busybox has no libc for a dynamic one).
func staticBusybox(t *testing.T) []byte {
	t.Helper()
	const path = "/bin/busybox"
	f, err := elf.Open(path)
	if err != nil {
		testenv.Unavailable(t, "static busybox", fmt.Sprintf("no usable %s (%v): apt-get install -y busybox-static", path, err))
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			testenv.Unavailable(t, "static busybox", path+" is dynamically linked: apt-get install -y busybox-static")
		}
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// busyboxRootfs is a tarball with bin/busybox and a few applet links:
// no /etc, no /usr, nothing else of a host.
func busyboxRootfs(t *testing.T) []byte {
	t.Helper()
	bin := staticBusybox(t)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	write := func(h *tar.Header, body []byte) {
		h.ModTime = time.Unix(1_700_000_000, 0)
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(body); err != nil {
			t.Fatal(err)
		}
	}
	write(&tar.Header{Name: "bin/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
	write(&tar.Header{Name: "bin/busybox", Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(bin))}, bin)
	for _, applet := range []string{"sh", "ls", "cat", "echo", "true"} {
		write(&tar.Header{Name: "bin/" + applet, Typeflag: tar.TypeSymlink, Linkname: "busybox"}, nil)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func execIn(t *testing.T, c *guest.Client, argv ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, errb, res, err := c.ExecOutput(ctx, guest.ExecRequest{Argv: argv, TimeoutMS: 20000})
	if err != nil {
		t.Fatalf("exec %q: %v", argv, err)
	}
	return string(out) + string(errb), res.ExitCode
}

// TestImageRootfs starts a sandbox whose / is an imported busybox image
// instead of the host's system dirs.
func TestImageRootfs(t *testing.T) {
	requireBwrap(t)
	ctx := context.Background()
	images := t.TempDir()
	if _, err := image.Import(ctx, images, "busybox", bytes.NewReader(busyboxRootfs(t)), false); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{ImagesDir: images, GuestArgs: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.MkdirTemp("", "akimg") // short: it holds the socket
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	spec := sandbox.Spec{
		ID: "sbx-image", Image: "busybox",
		WorkspaceDir: t.TempDir(), RunDir: run, GuestBinary: sandboxtest.BuildGuest(t),
		Secret: guest.NewSecret(),
	}
	startSandbox := func() (*sandbox.Handle, *guest.Client) {
		h, err := d.Start(ctx, spec)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.Destroy(context.Background(), h) })
		c := sandboxtest.Client(d, h)
		t.Cleanup(c.Close)
		sandboxtest.WaitHealthy(t, c)
		return h, c
	}
	h, c := startSandbox()

	if out, code := execIn(t, c, "busybox", "true"); code != 0 {
		t.Fatalf("busybox true: exit %d: %s", code, out)
	}
	// The host's /etc/os-release is not there: the image has no /etc.
	host, _ := os.ReadFile("/etc/os-release")
	if out, code := execIn(t, c, "cat", "/etc/os-release"); code == 0 && out == string(host) {
		t.Fatalf("the sandbox sees the host's /etc/os-release: %q", out)
	}
	if out, code := execIn(t, c, "ls", "/usr"); code == 0 {
		t.Fatalf("the sandbox sees a /usr the image does not have: %q", out)
	}
	// The shell is the image's busybox, through the applet link.
	if out, code := execIn(t, c, "sh", "-c", "echo hi from $0"); code != 0 || out != "hi from sh\n" {
		t.Fatalf("sh = %q (exit %d)", out, code)
	}
	// The image is read-only; /workspace and /tmp are not.
	if _, code := execIn(t, c, "sh", "-c", "echo x > /bin/new"); code == 0 {
		t.Fatal("wrote into the image's /bin")
	}
	if _, err := os.Stat(filepath.Join(images, "busybox", "bin", "new")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a file appeared in the image on the host: %v", err)
	}
	if out, code := execIn(t, c, "sh", "-c", "echo tmp > /tmp/t && cat /tmp/t && echo kept > /workspace/kept.txt"); code != 0 || out != "tmp\n" {
		t.Fatalf("writes to /tmp and /workspace = %q (exit %d)", out, code)
	}

	// /workspace outlives the sandbox.
	if err := d.Stop(ctx, h, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(spec.WorkspaceDir, "kept.txt")); err != nil || string(b) != "kept\n" {
		t.Fatalf("host workspace file = %q, %v", b, err)
	}
	_, c2 := startSandbox()
	if out, code := execIn(t, c2, "cat", "/workspace/kept.txt"); code != 0 || out != "kept\n" {
		t.Fatalf("after restart: %q (exit %d)", out, code)
	}
	if out, _ := execIn(t, c2, "ls", "/"); !strings.Contains(out, "bin") || !strings.Contains(out, "workspace") || strings.Contains(out, "usr") {
		t.Fatalf("ls / = %q; want the image's bin plus the sandbox mounts, no usr", out)
	}
}

func TestImageUnknown(t *testing.T) {
	requireBwrap(t)
	images := t.TempDir()
	// An import in progress is a hidden dir: never an image.
	if err := os.Mkdir(filepath.Join(images, ".import-x-123"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{ImagesDir: images})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"missing", ".import-x-123", "../x", "Bad"} {
		if err := d.CheckImage(context.Background(), name); !errors.Is(err, sandbox.ErrUnknownImage) {
			t.Errorf("CheckImage(%q) = %v, want ErrUnknownImage", name, err)
		}
	}
	err = d.CheckImage(context.Background(), "missing")
	if err == nil || !strings.Contains(err.Error(), "agentkernel image import missing") {
		t.Fatalf("error does not say how to import: %v", err)
	}
}
