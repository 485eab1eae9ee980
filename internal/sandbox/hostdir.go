package sandbox

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// PrivateDir makes path a directory that only this user can reach and that
// nobody else can swap out from under the daemon: it is created (mode 0700)
// if missing, and refused when it exists with another owner, with group or
// other permissions, or as a symlink, or when one of its parents is writable
// by another user (without the sticky bit, as /tmp has) or owned by one. The
// daemon keeps sockets, logs and generation stamps under it and trusts what
// it finds there.
func PrivateDir(path string) error {
	if !filepath.IsAbs(path) {
		return fmt.Errorf("%s: must be an absolute path", path)
	}
	path = filepath.Clean(path)
	parent := filepath.Dir(path)
	if err := os.MkdirAll(parent, 0o700); err != nil {
		return err
	}
	real, err := filepath.EvalSymlinks(parent)
	if err != nil {
		return err
	}
	// Both the path as written (its symlinks, such as /var/run, and the
	// directories holding them) and where it really leads.
	for _, p := range []string{parent, real} {
		for dir := p; ; dir = filepath.Dir(dir) {
			if err := safeAncestor(dir); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			if dir == "/" {
				break
			}
		}
	}
	if err := os.Mkdir(path, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	switch euid := os.Geteuid(); {
	case fi.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%s is a symlink: use the directory itself", path)
	case !fi.IsDir():
		return fmt.Errorf("%s is not a directory", path)
	case int(st.Uid) != euid:
		return fmt.Errorf("%s is owned by uid %d, not by this daemon's uid %d: remove it or choose another directory", path, st.Uid, euid)
	case fi.Mode().Perm()&0o077 != 0:
		return fmt.Errorf("%s has mode %04o: it must be 0700 (chmod 700 %s)", path, fi.Mode().Perm(), path)
	}
	return nil
}

// safeAncestor: owned by root or us, and writable by nobody else unless
// sticky (then only an entry's owner may rename or remove it).
func safeAncestor(dir string) error {
	fi, err := os.Lstat(dir)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	if st.Uid != 0 && int(st.Uid) != os.Geteuid() {
		return fmt.Errorf("parent %s is owned by uid %d: another user could replace what is in it; remove it or choose another directory", dir, st.Uid)
	}
	if fi.Mode()&fs.ModeSymlink == 0 && fi.Mode().Perm()&0o022 != 0 && fi.Mode()&fs.ModeSticky == 0 {
		return fmt.Errorf("parent %s has mode %04o: another user could replace what is in it; remove group and other write permission (chmod go-w %s)", dir, fi.Mode().Perm(), dir)
	}
	return nil
}
