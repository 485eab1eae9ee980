package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	agentguest "github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.RemoveAll(buildDir)
	os.Exit(code)
}

// The engine, test image and guest are set up once per test binary; a test
// that needs them calls engine(t) and is skipped, with the reason, when this
// machine cannot provide them.
var (
	setupOnce sync.Once
	skipWhy   string
	buildDir  string // temp dir with binaries built for the tests
	guestBin  string // the real guest, "" until internal/guest/guestmain exists
)

func setup() {
	d, err := New("", nil)
	if err != nil {
		skipWhy = err.Error()
		return
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := d.Check(ctx); err != nil {
		skipWhy = "docker tests need a running dockerd: " + err.Error()
		return
	}
	out, err := exec.Command("sh", "../../../scripts/docker-image/build.sh", DefaultImage).CombinedOutput()
	if err != nil {
		skipWhy = fmt.Sprintf("cannot build test image %s with scripts/docker-image/build.sh: %v\n%s", DefaultImage, err, out)
		return
	}
	if buildDir, err = os.MkdirTemp("", "agentkernel-docker-test-"); err != nil {
		skipWhy = err.Error()
		return
	}
	if srcs, _ := filepath.Glob("../../guest/guestmain/*.go"); len(srcs) > 0 {
		guest := filepath.Join(buildDir, "guest")
		cmd := exec.Command("go", "build", "-o", guest, "./internal/guest/guestmain")
		cmd.Dir = "../../.."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			skipWhy = fmt.Sprintf("cannot build the guest (CGO_ENABLED=0 go build ./internal/guest/guestmain): %v\n%s", err, out)
			return
		}
		guestBin = guest
	}
}

// engine returns a driver on the local dockerd, closed when t ends.
func engine(t testing.TB) *Driver {
	t.Helper()
	setupOnce.Do(setup)
	if skipWhy != "" {
		testenv.Unavailable(t, "docker", skipWhy)
	}
	d, err := New("", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

// realGuest returns the built guest binary or skips.
func realGuest(t testing.TB) string {
	t.Helper()
	engine(t)
	if guestBin == "" {
		t.Skip("internal/guest/guestmain does not exist yet")
	}
	return guestBin
}

// scriptGuest writes a /bin/sh stand-in for the guest that runs body and then
// idles as PID 1 until SIGTERM, so that driver behaviour can be tested apart
// from the guest's own API.
func scriptGuest(t testing.TB, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "guest.sh")
	script := "#!/bin/sh\ntrap 'exit 0' TERM\n" + body + "\nsleep 3600 &\nwait\n"
	if err := os.WriteFile(p, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// newSpec returns a spec with a fresh id and its own workspace and run dirs.
func newSpec(t testing.TB, guest string) sandbox.Spec {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	return sandbox.Spec{
		ID:           "test_" + hex.EncodeToString(b),
		WorkspaceDir: t.TempDir(),
		RunDir:       t.TempDir(),
		GuestBinary:  guest,
		Secret:       agentguest.NewSecret(),
	}
}

// start starts spec and destroys the sandbox when t ends.
func start(t testing.TB, d *Driver, spec sandbox.Spec) *sandbox.Handle {
	t.Helper()
	h, err := d.Start(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Destroy(context.Background(), h); err != nil {
			t.Errorf("destroy: %v", err)
		}
	})
	return h
}

// report is a shell snippet that runs cmds inside the sandbox and publishes
// their output atomically as /workspace/name.
func report(name, cmds string) string {
	return fmt.Sprintf("{ %s; } > /workspace/.%s.tmp 2>&1; mv /workspace/.%s.tmp /workspace/%s", cmds, name, name, name)
}

// waitFile polls for a file the sandbox publishes into its workspace.
func waitFile(t testing.TB, path string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		b, err := os.ReadFile(path)
		if err == nil {
			return strings.TrimSpace(string(b))
		}
		if time.Now().After(deadline) {
			t.Fatalf("sandbox did not write %s (last error %v)", path, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func isGone(err error) bool { return errors.Is(err, sandbox.ErrGone) }
