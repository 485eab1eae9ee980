// Package sandboxtest is the conformance suite every sandbox driver runs
// (the Nomad driver-harness model): lifecycle, guest protocol through the
// socket, workspace persistence, reattach after a simulated daemon restart,
// and isolation.
//
//	func TestConformance(t *testing.T) {
//		sandboxtest.Run(t, sandboxtest.Harness{NewDriver: …})
//	}
package sandboxtest

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// Harness describes the driver under test.
type Harness struct {
	// NewDriver returns a new driver instance. The suite calls it again to
	// simulate a daemon restart: the new instance knows the sandbox only
	// by its persisted Handle.
	NewDriver func(t *testing.T) sandbox.Driver
	// GuestBinary is a static guest binary on the host; "" builds one with
	// BuildGuest.
	GuestBinary string
	// Image is Spec.Image for every sandbox ("" = the driver's default).
	Image string
	// Limits says the driver enforces Limits.Pids and Limits.MemoryMB; the
	// limit tests run only then.
	Limits bool
	// Network is Spec.Network for the isolation tests ("" = none).
	Network string
}

// Run runs the suite.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.GuestBinary == "" {
		h.GuestBinary = BuildGuest(t)
	}
	s := &suite{h: h}
	t.Run("Lifecycle", s.testLifecycle)
	t.Run("Recover", s.testRecover)
	t.Run("Exec", s.testExec)
	t.Run("Isolation", s.testIsolation)
	t.Run("Network", s.testNetwork)
	t.Run("Reaping", s.testReaping)
	t.Run("Limits", s.testLimits)
	t.Run("Channel", s.testChannel)
}

// BuildGuest builds the guest (internal/guest/guestmain) statically into a
// temp dir and returns its path.
func BuildGuest(t testing.TB) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "guest")
	cmd := exec.Command("go", "build", "-o", out, "github.com/agentkernel/agentkernel/internal/guest/guestmain")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build guest: %v\n%s", err, b)
	}
	return out
}

type suite struct{ h Harness }

// sandboxDirs are the host dirs of one sandbox.
type sandboxDirs struct{ workspace, run string }

func newDirs(t *testing.T) sandboxDirs {
	t.Helper()
	// The run dir holds a unix socket: keep its path short (108 bytes max).
	// MkdirTemp makes it 0700, as a run dir must be.
	run, err := os.MkdirTemp("", "akrun")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(run) })
	return sandboxDirs{workspace: t.TempDir(), run: run}
}

func (s *suite) spec(t *testing.T, dirs sandboxDirs) sandbox.Spec {
	return sandbox.Spec{
		ID:           "sbx-" + sanitize(t.Name()),
		Image:        s.h.Image,
		Network:      s.h.Network,
		WorkspaceDir: dirs.workspace,
		RunDir:       dirs.run,
		GuestBinary:  s.h.GuestBinary,
		Secret:       guest.NewSecret(),
		Env:          map[string]string{"AK_TEST": "conformance"},
		Labels:       map[string]string{"agentkernel.test": "sandboxtest"},
	}
}

// start starts a sandbox, waits for its guest and destroys it at cleanup.
func start(t *testing.T, d sandbox.Driver, spec sandbox.Spec) (*sandbox.Handle, *guest.Client) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	h, err := d.Start(ctx, spec)
	if err != nil {
		t.Fatalf("Start: %v", err)
	}
	t.Cleanup(func() {
		if err := d.Destroy(context.Background(), h); err != nil {
			t.Errorf("Destroy: %v", err)
		}
	})
	if h.ID != spec.ID || h.Driver != d.Name() || !bytes.Equal(h.Secret, spec.Secret) {
		t.Fatalf("handle = %+v", h)
	}
	c := Client(d, h)
	t.Cleanup(c.Close)
	WaitHealthy(t, c)
	return h, c
}

// Client is the daemon's client for the sandbox h names: the driver dials,
// the handle's secret authenticates.
func Client(d sandbox.Driver, h *sandbox.Handle) *guest.Client {
	return guest.NewClient(func(ctx context.Context) (net.Conn, error) { return d.Dial(ctx, h) }, h.Secret)
}

// WaitHealthy polls the guest's health until it answers (30 s at most).
func WaitHealthy(t testing.TB, c *guest.Client) *guest.Health {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		hl, err := c.Health(ctx)
		cancel()
		if err == nil && hl.OK {
			return hl
		}
		if time.Now().After(deadline) {
			t.Fatalf("guest did not answer health: %v", err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// run execs a shell command in the sandbox.
func run(t *testing.T, c *guest.Client, shell string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, errb, res, err := c.ExecOutput(ctx, guest.ExecRequest{Shell: shell, TimeoutMS: 30000})
	if err != nil {
		t.Fatalf("exec %q: %v", shell, err)
	}
	return string(out), string(errb), res.ExitCode
}

func sanitize(name string) string {
	b := []byte(name)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-') {
			b[i] = '-'
		}
	}
	if len(b) > 50 {
		b = b[len(b)-50:]
	}
	return string(b)
}
