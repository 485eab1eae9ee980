// Package beneath opens host paths that a sandbox can influence without
// ever following a symlink: a name is resolved beneath a directory the
// daemon holds open, and any symlink, magic link or ".." on the way is an
// error instead of a detour. The workspace, and every directory bind-mounted
// into a sandbox, is written by code the daemon does not trust; this is how
// the daemon reads from them and reaches into them.
package beneath

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// ErrSymlink: the name leads through a symlink (or a magic link, or out of
// the directory), which is never followed.
var ErrSymlink = errors.New("path leads through a symlink or out of its directory")

const resolve = unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS | unix.RESOLVE_NO_XDEV

// Open opens name (relative, slash-separated) beneath dir with flag
// (O_RDONLY, O_PATH, O_WRONLY|O_CREATE…; O_CLOEXEC and O_NOFOLLOW are
// added). A name that crosses a symlink, a mount point or "..", or whose
// final component is a symlink, fails with an error matching ErrSymlink.
// Open never blocks on a FIFO: add O_NONBLOCK when name may be one.
func Open(dir *os.File, name string, flag int, perm os.FileMode) (*os.File, error) {
	how := unix.OpenHow{Flags: uint64(flag | unix.O_CLOEXEC | unix.O_NOFOLLOW), Resolve: resolve}
	if flag&os.O_CREATE != 0 {
		how.Mode = uint64(perm.Perm())
	}
	var fd int
	var err error
	for {
		fd, err = unix.Openat2(int(dir.Fd()), name, &how)
		if err != unix.EINTR && err != unix.EAGAIN {
			break
		}
	}
	switch {
	case errors.Is(err, unix.ELOOP), errors.Is(err, unix.EXDEV):
		return nil, &os.PathError{Op: "open", Path: name, Err: fmt.Errorf("%w (%v)", ErrSymlink, err)}
	case errors.Is(err, unix.ENOSYS):
		return nil, &os.PathError{Op: "open", Path: name, Err: errors.New("openat2 is not available: agentkernel needs Linux 5.6 or later")}
	case err != nil:
		return nil, &os.PathError{Op: "open", Path: name, Err: err}
	}
	return os.NewFile(uintptr(fd), dir.Name()+"/"+name), nil
}

// OpenDir opens the directory path itself for use with Open. path must be
// one the daemon trusts (its own data or run directory, or a directory
// below it that the daemon created): its final component is not followed
// if it is a symlink.
func OpenDir(path string) (*os.File, error) {
	fd, err := unix.Open(path, unix.O_DIRECTORY|unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// ReadFile reads at most limit bytes of the regular file name beneath dir.
// Anything but a regular file (a FIFO, a device, a directory) is refused
// without blocking.
func ReadFile(dir *os.File, name string, limit int64) ([]byte, error) {
	f, err := Open(dir, name, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "read", Path: name, Err: fmt.Errorf("not a regular file (%s)", fi.Mode().Type())}
	}
	size := min(fi.Size(), limit)
	b := make([]byte, size)
	n, err := f.ReadAt(b, 0)
	if n == len(b) {
		err = nil
	}
	return b[:n], err
}

// Readlink reads the target of the symlink f was opened on (Open with
// O_PATH: the link itself, never what it points at).
func Readlink(f *os.File) (string, error) {
	for n := 256; ; n *= 2 {
		b := make([]byte, n)
		m, err := unix.Readlinkat(int(f.Fd()), "", b)
		if err != nil {
			return "", err
		}
		if m < n {
			return string(b[:m]), nil
		}
	}
}
