// Package sandbox is agentkernel's sandbox layer: the driver interface every
// isolation backend implements (process on bubblewrap, docker on the Docker
// Engine API), and — later — the lifecycle manager that warms, hibernates and
// wakes sandboxes with their workspace intact (seed 000).
//
// The driver interface follows the Nomad task-driver model: a small required
// interface, optional capabilities as separate interfaces found by type
// assertion, and opaque driver state persisted in the store so a restarted
// daemon reattaches to sandboxes that outlived it.
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"time"
)

// Paths inside every sandbox.
const (
	// WorkspacePath is the sandbox's persistent, writable workspace.
	WorkspacePath = "/workspace"
	// AgentDir is a tmpfs of the sandbox's own in every sandbox: the guest's
	// agent socket (agent.sock) is there, for agents to post events. The
	// daemon's channel to the guest is not: see Driver.Dial.
	AgentDir = "/run/agentkernel"
	// GuestBinaryPath is where the guest binary is visible inside the sandbox.
	GuestBinaryPath = "/.agentkernel/guest"
	// RuntimePath is where Spec.RuntimeDir is mounted read-write: the
	// guest's op records and agent events, backed up with the workspace
	// but not in it.
	RuntimePath = "/.agentkernel/runtime"
	// AppPath is where an object class's app_dir is mounted read-only.
	AppPath = "/app"
)

// Network modes.
const (
	NetworkNone = "none"
	NetworkHost = "host"
	// NetworkEgress: only loopback, and the daemon's egress proxy reached
	// through the guest (package egress).
	NetworkEgress = "egress"
)

// Limits are resource limits. The manager gives every sandbox all three
// (see LimitPolicy); at the driver, zero means "no limit".
type Limits struct {
	MemoryMB int64   `json:"memory_mb,omitempty"`
	Pids     int64   `json:"pids,omitempty"`
	CPUs     float64 `json:"cpus,omitempty"`
}

// Mount is an extra bind mount from the host into the sandbox.
type Mount struct {
	Source   string // host path
	Target   string // path inside the sandbox
	ReadOnly bool
}

// Spec is everything a driver needs to start a sandbox. The caller (the
// lifecycle manager) owns WorkspaceDir and RunDir on the host and must not
// delete them while the sandbox runs; the driver must not delete them at all.
type Spec struct {
	ID      string // e.g. sbx_…; unique, usable in names and labels
	Image   string // driver-specific; "" = the driver's default
	Network string // NetworkNone (default), NetworkEgress or NetworkHost
	Limits  Limits
	// WorkspaceDir is the host directory mounted read-write at WorkspacePath.
	WorkspaceDir string
	// RuntimeDir, if set, is the host directory mounted read-write at
	// RuntimePath, where the guest keeps what must outlive it (without
	// one it keeps it in /workspace/.agentkernel, as earlier versions did).
	RuntimeDir string
	// RunDir is a host directory private to the daemon (mode 0700, empty at
	// start, short enough for unix socket paths): the driver keeps the
	// sandbox's guest socket and log there. It is never mounted into the
	// sandbox as a whole; a driver that must share a directory with the
	// guest mounts a subdirectory, and then never follows a path in it
	// (Dial).
	RunDir string
	// Secret is the sandbox's secret (guest.SecretSize bytes). The driver
	// hands it to the guest so that nothing inside the sandbox can read it
	// (never in a file, an argument or the environment) and returns it in
	// the Handle.
	Secret []byte
	// GuestBinary is the host path of the static guest binary.
	GuestBinary string
	// EgressDir, for a NetworkEgress sandbox, is the host directory the
	// driver mounts read-only at EgressPath (the proxy's socket and CA);
	// the driver runs the guest with EgressGuestFlags and EgressEnv.
	EgressDir string
	Env       map[string]string
	Labels    map[string]string
	Mounts    []Mount
	// PoolPipe, set only for a Pooler driver, starts the sandbox for a
	// warm pool: it is the read end of a pipe whose write end the manager
	// holds until the sandbox is assigned. The driver hands it to the
	// guest (--pool-fd), which ends when the pipe closes unassigned, so no
	// pooled sandbox outlives the daemon that pooled it. The caller closes
	// its copy once Start returns.
	PoolPipe *os.File
}

// Handle identifies a started sandbox. State is opaque driver data that the
// caller persists in the store and hands back to Recover after a restart.
type Handle struct {
	ID     string `json:"id"`
	Driver string `json:"driver"`
	// Secret is Spec.Secret: a restarted daemon needs it to talk to the
	// guest. A handle without one was made by a version that had none; its
	// sandbox is restarted, not trusted.
	Secret []byte `json:"secret,omitempty"`
	State  []byte `json:"state"`
}

// Status is what Inspect reports.
type Status struct {
	Running   bool
	ExitCode  int // meaningful when !Running
	StartedAt time.Time
	// LimitsApplied says how limits were enforced: "cgroup", "rlimit",
	// "docker" or "none".
	LimitsApplied string
	// Enforcement says, per limit field (LimitMemoryMB, LimitPids,
	// LimitCPUs), the value in force and the mechanism, or why not.
	Enforcement map[string]Enforcement
	Detail      map[string]string
}

// Driver is the required interface.
type Driver interface {
	Name() string
	// Start starts the sandbox with the guest as PID 1 and returns once the
	// sandbox process exists (not necessarily once the guest answers; the
	// caller probes). The sandbox must outlive the daemon process.
	Start(ctx context.Context, spec Spec) (*Handle, error)
	// Stop stops the sandbox's processes, waiting up to timeout before
	// killing. The workspace stays. Stopping a stopped sandbox is not an error.
	Stop(ctx context.Context, h *Handle, timeout time.Duration) error
	// Destroy removes everything the driver created for the sandbox (but not
	// WorkspaceDir/RunDir). Destroying twice is not an error.
	Destroy(ctx context.Context, h *Handle) error
	Inspect(ctx context.Context, h *Handle) (*Status, error)
	// Recover reattaches to a sandbox started by an earlier daemon process.
	// It returns ErrGone when the sandbox no longer runs.
	Recover(ctx context.Context, h *Handle) error
	// Dial opens a connection to the guest's socket (the caller runs the
	// secret handshake on it, guest.NewClient). Nothing the sandbox can
	// write may decide where it connects: it follows no symlink in a
	// directory the sandbox can write, and where the sandbox could put a
	// socket of its own there, it checks that the listener is the
	// sandbox's guest (ErrUntrustedPeer otherwise).
	Dial(ctx context.Context, h *Handle) (net.Conn, error)
}

// Pooler is an optional capability: the driver can start sandboxes ahead
// of need for the manager's warm pool (Spec.PoolPipe set, the spec naming
// the pool slot's ID and directories and nothing of a tenant) and hand one
// over to a sandbox later.
type Pooler interface {
	// Adopt makes the running pooled instance h the instance of sandbox
	// spec.ID and returns its handle. The caller has already moved the
	// slot's run dir to spec.RunDir and the sandbox's workspace and
	// runtime dir into the directories the instance has mounted; only
	// spec.ID and spec.RunDir are read.
	Adopt(ctx context.Context, h *Handle, spec Spec) (*Handle, error)
	// Mount attaches extra mounts (Spec.Mounts) to the running pooled
	// instance h before it is assigned, as a start would have.
	Mount(ctx context.Context, h *Handle, mounts []Mount) error
	// KillStarting ends whatever is left of a pooled sandbox whose start
	// was cut short (the daemon died before it had a handle): every
	// process of the driver's started on workspaceDir.
	KillStarting(ctx context.Context, workspaceDir string) error
}

// Lister is an optional capability: find the sandboxes this driver started,
// even those the store does not know (e.g. by container labels).
type Lister interface {
	List(ctx context.Context) ([]*Handle, error)
}

// Sentinel errors.
var (
	// ErrGone: the sandbox is no longer running (Recover, Inspect).
	ErrGone = errors.New("sandbox is gone")
	// ErrUnavailable: the driver cannot start sandboxes on this machine.
	ErrUnavailable = errors.New("sandbox driver unavailable")
	// ErrUnknownImage: the image does not exist for this driver.
	ErrUnknownImage = errors.New("unknown image")
)

// UnavailableError says why a driver cannot run and what to do about it.
type UnavailableError struct {
	Driver string
	Reason string // e.g. `bwrap not found in PATH: install the "bubblewrap" package`
}

func (e *UnavailableError) Error() string {
	return fmt.Sprintf("sandbox driver %q unavailable: %s", e.Driver, e.Reason)
}

func (e *UnavailableError) Unwrap() error { return ErrUnavailable }

// ImageChecker is an optional capability: tell whether an image exists
// before a sandbox is recorded, so a bad image is a clear 422 at create
// rather than a failure at the first call. The error wraps ErrUnknownImage
// and names the image.
type ImageChecker interface {
	CheckImage(ctx context.Context, image string) error
}
