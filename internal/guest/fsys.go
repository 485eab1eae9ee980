package guest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// fileSystem is what the files API needs of a file tree: an *os.Root on
// the work dir for paths inside it, hostFS for every other path.
type fileSystem interface {
	Open(name string) (*os.File, error)
	OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error)
	Lstat(name string) (fs.FileInfo, error)
	MkdirAll(name string, perm fs.FileMode) error
	Remove(name string) error
	RemoveAll(name string) error
	Rename(oldname, newname string) error
}

var _ fileSystem = (*os.Root)(nil)

// hostFS is the sandbox's whole file system, for absolute paths outside
// the work dir: those are the caller's explicit choice, so symlinks are
// followed as usual.
type hostFS struct{}

func (hostFS) Open(name string) (*os.File, error) { return os.Open(name) }
func (hostFS) OpenFile(name string, flag int, perm fs.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}
func (hostFS) Lstat(name string) (fs.FileInfo, error)       { return os.Lstat(name) }
func (hostFS) MkdirAll(name string, perm fs.FileMode) error { return os.MkdirAll(name, perm) }
func (hostFS) Remove(name string) error                     { return os.Remove(name) }
func (hostFS) RemoveAll(name string) error                  { return os.RemoveAll(name) }
func (hostFS) Rename(oldname, newname string) error         { return os.Rename(oldname, newname) }

// fileTarget is a files-API path resolved to the tree it lives in.
type fileTarget struct {
	fsys fileSystem
	name string // name within fsys: relative to the work dir, or absolute
	path string // absolute sandbox path, for answers and messages
	root *os.Root
}

// Limits of a path on Linux, checked before any system call so that a
// long name is a 400 naming the limit, never an errno from deep inside a
// write (whose atomic temp name is longer than the name itself).
const (
	MaxNameBytes = 255  // NAME_MAX: one path component
	MaxPathBytes = 4095 // PATH_MAX less the terminating NUL
)

// CheckPath refuses a files-API path the guest would refuse: empty, a NUL
// byte, a ".." segment, a component longer than MaxNameBytes or a path
// longer than MaxPathBytes. The daemon checks it too, before it wakes a
// sandbox for a request that cannot succeed.
func CheckPath(raw string) error {
	if raw == "" {
		return errors.New("path is required")
	}
	if strings.ContainsRune(raw, 0) {
		return fmt.Errorf("path %q contains a NUL byte", raw)
	}
	for _, seg := range strings.Split(raw, "/") {
		if seg == ".." {
			return fmt.Errorf("path %q contains a \"..\" segment", abbreviate(raw))
		}
		if len(seg) > MaxNameBytes {
			return fmt.Errorf("path component %q is %d bytes; the limit is %d (NAME_MAX)", abbreviate(seg), len(seg), MaxNameBytes)
		}
	}
	if len(raw) > MaxPathBytes {
		return fmt.Errorf("path is %d bytes; the limit is %d (PATH_MAX)", len(raw), MaxPathBytes)
	}
	return nil
}

func abbreviate(s string) string {
	if len(s) <= 40 {
		return s
	}
	return s[:20] + "…" + s[len(s)-12:]
}

// target resolves a request path. Inside the work dir every operation
// goes through an os.Root, so a symlink in the workspace (an agent's
// doing, or a restored backup's) is never followed out of it, whatever
// the daemon-side caller assumed about the path.
func (s *Server) target(raw string) (*fileTarget, error) {
	if err := CheckPath(raw); err != nil {
		return nil, fmt.Errorf("%w: %v", errBadRequest, err)
	}
	p := s.resolve(raw)
	if len(p) > MaxPathBytes {
		return nil, fmt.Errorf("%w: path %s is %d bytes; the limit is %d (PATH_MAX)", errBadRequest, abbreviate(p), len(p), MaxPathBytes)
	}
	rel, ok := s.inWorkDir(p)
	if !ok {
		return &fileTarget{fsys: hostFS{}, name: p, path: p}, nil
	}
	root, err := os.OpenRoot(s.cfg.WorkDir)
	if err != nil {
		return nil, fmt.Errorf("open work dir: %w", err)
	}
	return &fileTarget{fsys: root, name: rel, path: p, root: root}, nil
}

// inWorkDir returns p relative to the work dir ("." for the dir itself)
// when p is in it.
func (s *Server) inWorkDir(p string) (rel string, ok bool) {
	wd := s.cfg.WorkDir
	switch {
	case p == wd:
		return ".", true
	case wd == "/":
		return strings.TrimPrefix(p, "/"), true
	case strings.HasPrefix(p, wd+"/"):
		return p[len(wd)+1:], true
	}
	return "", false
}

func (t *fileTarget) close() {
	if t.root != nil {
		t.root.Close()
	}
}

// join names a child of the target in its tree.
func (t *fileTarget) join(child string) string { return filepath.Join(t.name, child) }

// wrap turns a file system error into one that names the sandbox path and
// says what went wrong in words a caller can act on, keeping the errno in
// the chain for writeError's status: os.Root's escape error (unexported in
// package os, so matched by text) becomes ErrEscapesWorkspace, and the
// errno of a temp file or a parent is reported against the path asked for.
func (t *fileTarget) wrap(err error) error {
	if err == nil {
		return nil
	}
	if t.root != nil && isEscape(err) {
		return fmt.Errorf("%w: %s leads out of %s through a symlink (absolute symlinks and symlinks that climb out are not followed)",
			ErrEscapesWorkspace, t.path, t.root.Name())
	}
	for _, e := range errnoText {
		if errors.Is(err, e.errno) {
			return &pathError{path: t.path, msg: e.text, err: err}
		}
	}
	if errors.Is(err, errNotRegular) {
		return &pathError{path: t.path, msg: "not a regular file (a named pipe, socket or device); the files API reads and writes regular files only", err: err}
	}
	return err
}

// errnoText says what each errno the files API can meet means for the
// caller, in the order they are matched (ENOTEMPTY also matches EEXIST).
var errnoText = []struct {
	errno syscall.Errno
	text  string
}{
	{syscall.ENOENT, "no such file or directory"},
	{syscall.ENOTEMPTY, "directory not empty; remove it with recursive"},
	{syscall.EEXIST, "already exists"},
	{syscall.EROFS, "not writable: it is on a read-only file system (in a sandbox, /workspace and /tmp are writable)"},
	{syscall.EACCES, "permission denied: the sandbox's user may not access it"},
	{syscall.EPERM, "operation not permitted for the sandbox's user"},
	{syscall.ENAMETOOLONG, fmt.Sprintf("file name too long: a path component may be %d bytes, a path %d", MaxNameBytes, MaxPathBytes)},
	{syscall.ELOOP, "too many levels of symbolic links"},
	{syscall.ENOTDIR, "a parent of the path is not a directory"},
	{syscall.EISDIR, "is a directory"},
	{syscall.ENOSPC, "no space left on the sandbox's file system"},
	{syscall.EDQUOT, "the sandbox's disk quota is exhausted"},
	{syscall.EFBIG, "file too large for the sandbox's file system or file size limit"},
	{syscall.ENXIO, "not a regular file (a named pipe with no reader, or a device); the files API reads and writes regular files only"},
	{syscall.EBUSY, "busy: a mount point, or in use"},
	{syscall.ETXTBSY, "busy: a program that is running"},
	{syscall.EINVAL, "invalid argument for this file"},
}

// errNotRegular marks a path that exists and is not a regular file.
var errNotRegular = errors.New("not a regular file")

// pathError is a file system error said in terms of the sandbox path.
type pathError struct {
	path, msg string
	err       error
}

func (e *pathError) Error() string { return e.path + ": " + e.msg }
func (e *pathError) Unwrap() error { return e.err }

// isEscape finds os.Root's "path escapes from parent" anywhere in err's
// chain (MkdirAll nests it in two PathErrors).
func isEscape(err error) bool {
	for ; err != nil; err = errors.Unwrap(err) {
		if err.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}
