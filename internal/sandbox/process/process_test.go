package process

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/sandbox/sandboxtest"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

func requireBwrap(t testing.TB) {
	t.Helper()
	testenv.Command(t, "bwrap", "apt-get install -y bubblewrap")
}

func newDriver(cfg Config) func(t *testing.T) sandbox.Driver {
	return func(t *testing.T) sandbox.Driver {
		t.Helper()
		d, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
}

func TestConformance(t *testing.T) {
	requireBwrap(t)
	sandboxtest.Run(t, sandboxtest.Harness{NewDriver: newDriver(Config{GuestArgs: []string{}}), Limits: true})
}

// With cgroups disabled the driver falls back to rlimits: memory is still
// limited (RLIMIT_AS), pids are reported as not enforced.
func TestConformanceRlimits(t *testing.T) {
	requireBwrap(t)
	sandboxtest.Run(t, sandboxtest.Harness{NewDriver: newDriver(Config{DisableCgroups: true}), Limits: true})
}

func TestMissingBwrap(t *testing.T) {
	_, err := New(Config{BwrapPath: "/nonexistent/bwrap"})
	var ue *sandbox.UnavailableError
	if !errors.As(err, &ue) || !errors.Is(err, sandbox.ErrUnavailable) || ue.Driver != Name {
		t.Fatalf("err = %v, want *UnavailableError", err)
	}
	if want := `"bubblewrap"`; !strings.Contains(ue.Reason, want) {
		t.Fatalf("reason %q does not name the package %s", ue.Reason, want)
	}
}

func TestCheckImage(t *testing.T) {
	requireBwrap(t)
	images := t.TempDir()
	if err := os.Mkdir(filepath.Join(images, "alpine"), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := New(Config{ImagesDir: images})
	if err != nil {
		t.Fatal(err)
	}
	for image, ok := range map[string]bool{"": true, "alpine": true, "missing": false, "../etc": false} {
		err := d.CheckImage(context.Background(), image)
		if ok && err != nil || !ok && !errors.Is(err, sandbox.ErrUnknownImage) {
			t.Errorf("CheckImage(%q) = %v", image, err)
		}
	}
}

// A memory limit whose shift to bytes would overflow int64 is refused
// before anything starts, never wrapped (2^62 MB << 20 is 0: no limit).
func TestStartRefusesMemoryOverflow(t *testing.T) {
	requireBwrap(t)
	d, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.MkdirTemp("", "akov")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(run)
	h, err := d.Start(context.Background(), sandbox.Spec{ID: "sbx-overflow", WorkspaceDir: t.TempDir(), RunDir: run,
		GuestBinary: "/bin/true", Limits: sandbox.Limits{MemoryMB: 1 << 62}})
	if err == nil {
		d.Destroy(context.Background(), h)
		t.Fatal("started with memory_mb 2^62")
	}
	if !strings.Contains(err.Error(), "out of range") {
		t.Fatalf("err = %v", err)
	}
}
