// Package process is the default sandbox driver: Linux namespaces through
// bubblewrap (bwrap). Each sandbox is a bwrap process in its own session
// whose child — the guest, PID 1 of a new PID namespace (--as-pid-1) — sees
// read-only system directories, a writable /workspace and /tmp, tmpfs of
// its own, and nothing else of the host. The guest's socket is created by
// the driver in the private run directory (not mounted) and inherited by
// the guest as an open file, with the sandbox's secret in a pipe.
//
// Sandboxes outlive the daemon: bwrap runs without --die-with-parent in a
// new session, and the handle's state (guest pid + its start time from
// /proc, cgroup dirs) is enough for a new daemon to find and stop it.
// A sandbox started for the manager's warm pool (Spec.PoolPipe) does not
// outlive the daemon until it is assigned: its guest ends when the pipe's
// write end, which the manager holds, closes (Adopt, the manager's pool).
package process

import (
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"sync"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// Name is the driver's name in handles and config.
const Name = "process"

// Config configures the driver.
type Config struct {
	// BwrapPath is the bwrap binary (default: "bwrap" looked up in PATH).
	BwrapPath string
	// ImagesDir holds root filesystems: Spec.Image names a directory in it.
	// An empty Spec.Image uses the host's system directories read-only.
	ImagesDir string
	// GuestArgs come before the guest's own flags; the default ["guest"]
	// fits GuestBinary being the agentkernel binary (`agentkernel guest`).
	GuestArgs []string
	// CgroupRoot is where cgroup filesystems are mounted (default
	// /sys/fs/cgroup).
	CgroupRoot string
	// DisableCgroups forces rlimits for resource limits.
	DisableCgroups bool
	Logger         *slog.Logger
}

// Driver runs sandboxes with bubblewrap.
type Driver struct {
	cfg   Config
	bwrap string
	log   *slog.Logger

	mu      sync.Mutex
	running map[string]*bwrapProc // sandboxes this process started, by ID
}

// bwrapProc is a bwrap child of this daemon process; exited closes once
// it was reaped.
type bwrapProc struct {
	cmd      *exec.Cmd
	exited   chan struct{}
	exitCode int
}

var (
	_ sandbox.Driver       = (*Driver)(nil)
	_ sandbox.ImageChecker = (*Driver)(nil)
	_ sandbox.Pooler       = (*Driver)(nil)
)

// New returns a driver, or an *sandbox.UnavailableError when bwrap is not
// installed.
func New(cfg Config) (*Driver, error) {
	if cfg.BwrapPath == "" {
		cfg.BwrapPath = "bwrap"
	}
	if cfg.GuestArgs == nil {
		cfg.GuestArgs = []string{"guest"}
	}
	if cfg.CgroupRoot == "" {
		cfg.CgroupRoot = "/sys/fs/cgroup"
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	path, err := exec.LookPath(cfg.BwrapPath)
	if err != nil {
		return nil, &sandbox.UnavailableError{
			Driver: Name,
			Reason: fmt.Sprintf("bwrap not found (%s): install the %q package (apt-get install bubblewrap)", cfg.BwrapPath, "bubblewrap"),
		}
	}
	if cfg.ImagesDir != "" {
		if fi, err := os.Stat(cfg.ImagesDir); err != nil || !fi.IsDir() {
			return nil, fmt.Errorf("process driver: images dir %q is not a directory", cfg.ImagesDir)
		}
	}
	return &Driver{cfg: cfg, bwrap: path, log: cfg.Logger, running: map[string]*bwrapProc{}}, nil
}

// Name implements sandbox.Driver.
func (d *Driver) Name() string { return Name }
