package process

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sort"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// systemDirs are the host directories a sandbox without an image sees,
// read-only. Symlinks (merged /usr: /bin → usr/bin) are recreated as
// symlinks.
var systemDirs = []string{"usr", "bin", "sbin", "lib", "lib32", "lib64", "libx32"}

// etcAllow are the host /etc entries a sandbox without an image sees: what
// programs need to run (users, DNS, TLS roots, the dynamic linker, Debian's
// alternatives symlinks), and not secrets such as shadow, ssh host keys or
// sudoers.
var etcAllow = []string{
	"alternatives", "bash.bashrc", "ca-certificates", "ca-certificates.conf",
	"debian_version", "environment", "gai.conf", "group", "host.conf", "hosts",
	"inputrc", "ld.so.cache", "ld.so.conf", "ld.so.conf.d", "localtime",
	"mime.types", "networks", "nsswitch.conf", "os-release", "passwd",
	"profile", "protocols", "resolv.conf", "services", "shells", "ssl",
	"timezone",
}

// imageSkip are top-level entries of an image rootfs that the sandbox gets
// fresh instead.
var imageSkip = map[string]bool{
	"proc": true, "dev": true, "sys": true, "tmp": true, "run": true,
	"workspace": true, ".agentkernel": true,
}

// guestStateDir is the guest's private tmpfs for background output.
const guestStateDir = "/.agentkernel/state"

// Fds passed to bwrap (ExtraFiles start at 3). bwrap consumes the first
// two; the guest inherits the others: the daemon's listening socket and a
// pipe holding the sandbox's secret.
const (
	blockFd  = 3
	infoFd   = 4
	secretFd = 5
	listenFd = 6
	// poolFd is the pool pipe of a pooled sandbox (Spec.PoolPipe).
	poolFd = 7
)

// bwrapArgs builds bwrap's command line. root is the image rootfs, or ""
// for the host's system dirs.
func (d *Driver) bwrapArgs(spec sandbox.Spec, root string, guestFlags []string) ([]string, error) {
	a := []string{
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try",
		"--as-pid-1",    // the guest is PID 1 and reaps orphans itself
		"--new-session", // no TIOCSTI into the daemon's terminal
		"--cap-drop", "ALL",
		"--hostname", hostname(spec.ID),
		"--clearenv",
	}
	if spec.Network != sandbox.NetworkHost {
		a = append(a, "--unshare-net") // bwrap brings lo up
	}
	envs := spec.Env
	if spec.EgressDir != "" {
		// Outbound only through the daemon's proxy, which the guest
		// forwards to from the sandbox's own loopback: no route exists.
		envs = maps.Clone(spec.Env)
		if envs == nil {
			envs = map[string]string{}
		}
		maps.Copy(envs, sandbox.EgressEnv())
		guestFlags = append(guestFlags, sandbox.EgressGuestFlags()...)
	}
	for _, kv := range env(envs) {
		a = append(a, "--setenv", kv[0], kv[1])
	}
	rootArgs, err := rootfsArgs(root)
	if err != nil {
		return nil, err
	}
	a = append(a, rootArgs...)
	a = append(a,
		"--proc", "/proc",
		"--dev", "/dev",
		"--tmpfs", "/tmp",
		"--bind", spec.WorkspaceDir, sandbox.WorkspacePath,
		// The sandbox's own: the guest's agent socket. The daemon's socket
		// is in spec.RunDir, which is not mounted at all.
		"--tmpfs", sandbox.AgentDir,
		"--ro-bind", spec.GuestBinary, sandbox.GuestBinaryPath,
		"--tmpfs", guestStateDir,
	)
	if spec.EgressDir != "" {
		a = append(a, "--ro-bind", spec.EgressDir, sandbox.EgressPath)
	}
	if spec.RuntimeDir != "" {
		a = append(a, "--bind", spec.RuntimeDir, sandbox.RuntimePath)
		guestFlags = append(guestFlags, "--runtime-dir", sandbox.RuntimePath)
	}
	for _, m := range spec.Mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Target) {
			return nil, fmt.Errorf("process driver: mount %q → %q: both paths must be absolute", m.Source, m.Target)
		}
		op := "--bind"
		if m.ReadOnly {
			op = "--ro-bind"
		}
		a = append(a, op, m.Source, m.Target)
	}
	a = append(a,
		// bwrap's root is a tmpfs of mount points; read-only, so the only
		// writable places are /workspace, /tmp, /run/agentkernel and the
		// runtime dir.
		"--remount-ro", "/",
		"--chdir", sandbox.WorkspacePath,
		"--block-fd", fmt.Sprint(blockFd),
		"--info-fd", fmt.Sprint(infoFd),
		"--", sandbox.GuestBinaryPath,
	)
	a = append(a, d.cfg.GuestArgs...)
	a = append(a,
		"--listen-fd", fmt.Sprint(listenFd),
		"--secret-fd", fmt.Sprint(secretFd),
		"--state-dir", guestStateDir,
		"--workdir", sandbox.WorkspacePath,
	)
	if spec.PoolPipe != nil {
		a = append(a, "--pool-fd", fmt.Sprint(poolFd))
	}
	return append(a, guestFlags...), nil
}

// rootfsArgs lays out /. With an image, / is the image rootfs read-only:
// each top-level entry is ro-bound onto bwrap's tmpfs root (remounted
// read-only at the end) rather than binding the rootfs itself at /, so an
// image needs no mount points of its own (/workspace, /run/agentkernel,
// /.agentkernel) and nothing is ever created inside it.
func rootfsArgs(root string) ([]string, error) {
	var a []string
	if root == "" {
		for _, name := range systemDirs {
			a = append(a, entryArgs("/"+name, "/"+name)...)
		}
		a = append(a, "--dir", "/etc")
		for _, name := range etcAllow {
			// -try: skip entries this host lacks; a bind follows symlinks
			// (resolv.conf → /run/…), so the content is visible.
			a = append(a, "--ro-bind-try", "/etc/"+name, "/etc/"+name)
		}
		return a, nil
	}
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("process driver: image rootfs: %w", err)
	}
	for _, e := range entries {
		if imageSkip[e.Name()] {
			continue
		}
		a = append(a, entryArgs(filepath.Join(root, e.Name()), "/"+e.Name())...)
	}
	return a, nil
}

// entryArgs mounts src at dst read-only, or recreates it if it is a
// symlink; missing entries are skipped.
func entryArgs(src, dst string) []string {
	fi, err := os.Lstat(src)
	switch {
	case err != nil:
		return nil
	case fi.Mode()&os.ModeSymlink != 0:
		target, err := os.Readlink(src)
		if err != nil {
			return nil
		}
		return []string{"--symlink", target, dst}
	default:
		return []string{"--ro-bind", src, dst}
	}
}

// env is the sandbox's environment: defaults overlaid with spec.Env, sorted.
func env(extra map[string]string) [][2]string {
	m := map[string]string{
		"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME": sandbox.WorkspacePath,
		"LANG": "C.UTF-8",
	}
	for k, v := range extra {
		m[k] = v
	}
	out := make([][2]string, 0, len(m))
	for k, v := range m {
		out = append(out, [2]string{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// hostname fits the sandbox ID into a valid hostname length.
func hostname(id string) string {
	if len(id) > 63 {
		return id[:63]
	}
	if id == "" {
		return "sandbox"
	}
	return id
}
