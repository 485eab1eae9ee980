package guest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
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

// target resolves a request path. Inside the work dir every operation
// goes through an os.Root, so a symlink in the workspace (an agent's
// doing, or a restored backup's) is never followed out of it, whatever
// the daemon-side caller assumed about the path.
func (s *Server) target(raw string) (*fileTarget, error) {
	if raw == "" {
		return nil, fmt.Errorf("%w: path is required", errBadRequest)
	}
	if strings.ContainsRune(raw, 0) {
		return nil, fmt.Errorf("%w: path %q contains a NUL byte", errBadRequest, raw)
	}
	for _, seg := range strings.Split(raw, "/") {
		if seg == ".." {
			return nil, fmt.Errorf("%w: path %q contains a \"..\" segment", errBadRequest, raw)
		}
	}
	p := s.resolve(raw)
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

// wrap turns os.Root's escape error (unexported in package os, so matched
// by text) into ErrEscapesWorkspace with the sandbox path.
func (t *fileTarget) wrap(err error) error {
	if err == nil || t.root == nil {
		return err
	}
	if isEscape(err) {
		return fmt.Errorf("%w: %s leads out of %s through a symlink (absolute symlinks and symlinks that climb out are not followed)",
			ErrEscapesWorkspace, t.path, t.root.Name())
	}
	return err
}

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
