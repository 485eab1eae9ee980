package process

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// openTreeCloexec is OPEN_TREE_CLOEXEC (O_CLOEXEC).
const openTreeCloexec = unix.O_CLOEXEC

// Mount implements sandbox.Pooler: it attaches mounts to the running,
// not yet assigned sandbox h, as bwrap's --bind and --ro-bind would have at
// its start. Each source is cloned here, in the daemon's mount namespace,
// where host paths mean what the daemon means (open_tree); a thread of the
// daemon then enters the sandbox's mount namespace alone (unshare of its
// fs, setns) and moves the clones onto their targets, creating the mount
// points on the sandbox's read-only root for the moment it takes. Nothing
// of a tenant has run in the sandbox yet, so its view is the one bwrap
// built. The thread is discarded afterwards (it stays locked).
func (d *Driver) Mount(_ context.Context, h *sandbox.Handle, mounts []sandbox.Mount) error {
	st, err := decodeState(h)
	if err != nil {
		return err
	}
	if len(mounts) == 0 {
		return nil
	}
	isDir := make([]bool, len(mounts))
	for i, m := range mounts {
		if !filepath.IsAbs(m.Source) || !filepath.IsAbs(m.Target) || filepath.Clean(m.Target) == "/" || strings.Contains(m.Target, "/../") || strings.HasSuffix(m.Target, "/..") {
			return fmt.Errorf("process driver: mount %q → %q: both paths must be absolute, the target below /", m.Source, m.Target)
		}
		fi, err := os.Stat(m.Source)
		if err != nil {
			return fmt.Errorf("process driver: mount source: %w", err)
		}
		isDir[i] = fi.IsDir()
	}
	var trees []int
	defer func() {
		for _, fd := range trees {
			unix.Close(fd)
		}
	}()
	for _, m := range mounts {
		fd, err := unix.OpenTree(unix.AT_FDCWD, m.Source, unix.OPEN_TREE_CLONE|openTreeCloexec|unix.AT_RECURSIVE)
		if err != nil {
			return fmt.Errorf("process driver: open_tree %s: %w", m.Source, err)
		}
		trees = append(trees, fd)
		if m.ReadOnly {
			if err := unix.MountSetattr(fd, "", unix.AT_EMPTY_PATH|unix.AT_RECURSIVE, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); err != nil {
				return fmt.Errorf("process driver: make %s read-only: %w", m.Source, err)
			}
		}
	}
	ns, err := unix.Open(fmt.Sprintf("/proc/%d/ns/mnt", st.PID), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("process driver: the sandbox's mount namespace: %w", err)
	}
	defer unix.Close(ns)
	// The namespace is pinned by ns: make sure it is the guest's, not a
	// later process's that took its pid.
	if !st.alive() {
		return fmt.Errorf("process driver: mount into %s (pid %d not running): %w", h.ID, st.PID, sandbox.ErrGone)
	}
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine
		errc <- mountInNamespace(ns, trees, mounts, isDir)
	}()
	if err := <-errc; err != nil {
		return fmt.Errorf("process driver: mount into %s: %w", h.ID, err)
	}
	return nil
}

// mountInNamespace runs on a locked thread of its own, which it moves into
// the mount namespace ns.
func mountInNamespace(ns int, trees []int, mounts []sandbox.Mount, isDir []bool) error {
	if err := unix.Unshare(unix.CLONE_FS); err != nil {
		return fmt.Errorf("unshare(CLONE_FS): %w", err)
	}
	if err := unix.Setns(ns, unix.CLONE_NEWNS); err != nil {
		return fmt.Errorf("setns: %w", err)
	}
	// Only the read-only flag changes, for as long as the mount points
	// take; nosuid and nodev stay.
	if err := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{Attr_clr: unix.MOUNT_ATTR_RDONLY}); err != nil {
		return fmt.Errorf("make the root writable for the mount points: %w", err)
	}
	var err error
	for i, m := range mounts {
		if isDir[i] {
			err = os.MkdirAll(m.Target, 0o755)
		} else if err = os.MkdirAll(filepath.Dir(m.Target), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(m.Target, os.O_CREATE|os.O_WRONLY, 0o644); err == nil {
				f.Close()
			}
		}
		if err != nil {
			err = fmt.Errorf("mount point %s: %w", m.Target, err)
			break
		}
		if err = unix.MoveMount(trees[i], "", unix.AT_FDCWD, m.Target, unix.MOVE_MOUNT_F_EMPTY_PATH); err != nil {
			err = fmt.Errorf("move_mount onto %s: %w", m.Target, err)
			break
		}
	}
	if rerr := unix.MountSetattr(unix.AT_FDCWD, "/", 0, &unix.MountAttr{Attr_set: unix.MOUNT_ATTR_RDONLY}); rerr != nil && err == nil {
		err = fmt.Errorf("make the root read-only again: %w", rerr)
	}
	return err
}

// KillStarting implements sandbox.Pooler: it SIGKILLs every bwrap
// process, outer or inner, whose command line binds workspaceDir, so a
// sandbox whose start a dying daemon left half done (no handle recorded)
// does not run on. Only processes running this driver's bwrap binary are
// considered: a command line is anyone's to write.
func (d *Driver) KillStarting(_ context.Context, workspaceDir string) error {
	bwrap, err := filepath.EvalSymlinks(d.bwrap)
	if err != nil {
		return err
	}
	needle := "\x00--bind\x00" + workspaceDir + "\x00"
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return err
	}
	for _, p := range procs {
		pid := p.Name()
		if pid[0] < '0' || pid[0] > '9' {
			continue
		}
		if exe, err := os.Readlink("/proc/" + pid + "/exe"); err != nil || exe != bwrap {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + pid + "/cmdline")
		if err != nil || !strings.Contains("\x00"+string(cmdline), needle) {
			continue
		}
		var n int
		if _, err := fmt.Sscan(pid, &n); err == nil && n > 1 {
			_ = unix.Kill(n, unix.SIGKILL)
		}
	}
	return nil
}
