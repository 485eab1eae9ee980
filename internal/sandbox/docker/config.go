package docker

import (
	"errors"
	"fmt"
	"maps"
	"math"
	"path/filepath"
	"regexp"
	"slices"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// guestStateDir is the guest's private scratch dir (background process
// output); a tmpfs, as in the process driver, since the rootfs is read-only.
const guestStateDir = "/.agentkernel/state"

// The guest's socket. A container cannot inherit a listening socket from
// the daemon, so the guest creates it in the one directory it shares with
// the host: sockDirName in the private run dir, mounted at guestSockDir.
// The sandbox can write there too, so Dial follows nothing in it and talks
// only to a socket the container's init (the guest) listens on.
const (
	sockDirName   = "sock"
	guestSockDir  = "/.agentkernel/sock"
	guestSockName = "guest.sock"
)

// containerName is the Docker name of a sandbox's container.
func containerName(id string) string { return "agentkernel-" + id }

// validID is Docker's rule for container names, minus the prefix we add.
var validID = regexp.MustCompile(`^[a-zA-Z0-9][a-zA-Z0-9_.-]*$`)

// createOptions is the pure translation of a Spec into a container: it does
// no I/O so the mapping can be tested without an engine.
type createOptions struct {
	name   string
	config *container.Config
	host   *container.HostConfig
}

func buildCreate(spec sandbox.Spec, image string) (*createOptions, error) {
	if err := validateSpec(spec); err != nil {
		return nil, err
	}
	network, err := networkMode(spec.Network)
	if err != nil {
		return nil, err
	}

	labels := make(map[string]string, len(spec.Labels)+2)
	maps.Copy(labels, spec.Labels)
	// Ours last: a caller's label must not hide a container from List.
	labels[LabelSandbox] = spec.ID
	labels[LabelManaged] = "true"

	envs := spec.Env
	if spec.EgressDir != "" {
		envs = maps.Clone(spec.Env)
		if envs == nil {
			envs = map[string]string{}
		}
		maps.Copy(envs, sandbox.EgressEnv())
	}
	env := make([]string, 0, len(envs))
	for _, k := range slices.Sorted(maps.Keys(envs)) {
		env = append(env, k+"="+envs[k])
	}

	// Mounts (not Binds) so that a missing host path is an error instead of
	// Docker silently creating an empty directory in its place.
	mounts := []mount.Mount{
		{Type: mount.TypeBind, Source: spec.GuestBinary, Target: sandbox.GuestBinaryPath, ReadOnly: true},
		{Type: mount.TypeBind, Source: spec.WorkspaceDir, Target: sandbox.WorkspacePath},
		{Type: mount.TypeBind, Source: filepath.Join(spec.RunDir, sockDirName), Target: guestSockDir},
	}
	cmd := []string{"guest", "--state-dir", guestStateDir, "--socket", guestSockDir + "/" + guestSockName, "--secret-fd", "0"}
	if spec.RuntimeDir != "" {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: spec.RuntimeDir, Target: sandbox.RuntimePath})
		cmd = append(cmd, "--runtime-dir", sandbox.RuntimePath)
	}
	if spec.EgressDir != "" {
		// The container has no network at all (network mode none: only
		// lo); its one way out is the daemon's egress proxy, whose socket
		// the guest forwards to from the container's loopback — the same
		// path as the process driver's, and stricter than an internal
		// Docker network, which would still route to the host's bridge.
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: spec.EgressDir, Target: sandbox.EgressPath, ReadOnly: true})
		cmd = append(cmd, sandbox.EgressGuestFlags()...)
	}
	for _, m := range spec.Mounts {
		mounts = append(mounts, mount.Mount{Type: mount.TypeBind, Source: m.Source, Target: m.Target, ReadOnly: m.ReadOnly})
	}

	noInit := false
	host := &container.HostConfig{
		Mounts:        mounts,
		NetworkMode:   container.NetworkMode(network),
		RestartPolicy: container.RestartPolicy{Name: container.RestartPolicyDisabled},
		// The guest is PID 1 and reaps its children; docker-init would hide
		// it from the signals Stop sends.
		Init:      &noInit,
		Resources: resources(spec.Limits),
		// Like the process driver: the system is read-only and only
		// /workspace and a fresh /tmp are writable, so nothing a sandbox
		// writes outside its workspace survives a stop.
		ReadonlyRootfs: true,
		Tmpfs: map[string]string{
			"/tmp":           "rw,exec,nosuid,nodev,mode=1777",
			guestStateDir:    "rw,nosuid,nodev,mode=0700",
			sandbox.AgentDir: "rw,nosuid,nodev,mode=0755",
		},
	}
	cfg := &container.Config{
		Image:      image,
		Entrypoint: []string{sandbox.GuestBinaryPath},
		// "guest" selects the subcommand of the agentkernel binary (and is
		// accepted by the stand-alone guest build too). The secret comes on
		// stdin, written once by Start: never in the container's config,
		// files or environment.
		Cmd:         cmd,
		Env:         env,
		WorkingDir:  sandbox.WorkspacePath,
		Labels:      labels,
		OpenStdin:   true,
		StdinOnce:   true,
		AttachStdin: true,
	}
	return &createOptions{name: containerName(spec.ID), config: cfg, host: host}, nil
}

func validateSpec(spec sandbox.Spec) error {
	var errs []error
	if !validID.MatchString(spec.ID) {
		errs = append(errs, fmt.Errorf("spec.ID %q: must match %s to be usable in a container name", spec.ID, validID))
	}
	for _, f := range []struct{ field, path string }{
		{"spec.WorkspaceDir", spec.WorkspaceDir},
		{"spec.RunDir", spec.RunDir},
		{"spec.GuestBinary", spec.GuestBinary},
	} {
		if !filepath.IsAbs(f.path) {
			errs = append(errs, fmt.Errorf("%s %q: must be an absolute host path", f.field, f.path))
		}
	}
	for i, m := range spec.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Target) {
			errs = append(errs, fmt.Errorf("spec.Mounts[%d] %q→%q: source and target must be absolute paths", i, m.Source, m.Target))
		}
	}
	l := spec.Limits
	if l.MemoryMB < 0 || l.Pids < 0 || l.CPUs < 0 || math.IsNaN(l.CPUs) || math.IsInf(l.CPUs, 0) {
		errs = append(errs, fmt.Errorf("spec.Limits %+v: limits must be zero (no limit) or positive", l))
	} else if _, err := l.MemoryBytes(); err != nil {
		errs = append(errs, fmt.Errorf("spec.Limits: %w", err))
	}
	return errors.Join(errs...)
}

func networkMode(n string) (string, error) {
	switch n {
	case "", sandbox.NetworkNone, sandbox.NetworkEgress:
		return "none", nil
	case sandbox.NetworkHost:
		return "host", nil
	default:
		return "", fmt.Errorf("spec.Network %q: must be %q, %q or %q", n, sandbox.NetworkNone, sandbox.NetworkEgress, sandbox.NetworkHost)
	}
}

func resources(l sandbox.Limits) container.Resources {
	var r container.Resources
	if l.MemoryMB > 0 {
		r.Memory, _ = l.MemoryBytes() // validateSpec refused an overflow
		// Equal to Memory: no swap on top, so the limit is the limit.
		r.MemorySwap = r.Memory
	}
	if l.Pids > 0 {
		pids := l.Pids
		r.PidsLimit = &pids
	}
	if l.CPUs > 0 {
		r.NanoCPUs = int64(math.Round(l.CPUs * 1e9))
	}
	return r
}
