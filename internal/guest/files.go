package guest

import (
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// maxWriteBytes bounds one file write through the guest.
const maxWriteBytes = 512 << 20

// Every handler resolves its path with Server.target: paths in the work
// dir go through an os.Root (fsys.go), others through the plain file system.

func (s *Server) queryTarget(r *http.Request) (*fileTarget, error) {
	return s.target(r.URL.Query().Get("path"))
}

// errTooLarge: a file is larger than the caller's max.
var errTooLarge = errors.New("file too large")

// handleReadFile streams a regular file. It opens without blocking (a named
// pipe would otherwise hang the request until a writer appears) and
// refuses anything but a regular file: a device such as /dev/zero never
// ends. With max, a file larger than max bytes is refused, and at most max
// bytes are sent even if it grows meanwhile (files in /proc report size 0,
// so the body carries no Content-Length).
func (s *Server) handleReadFile(w http.ResponseWriter, r *http.Request) {
	t, err := s.queryTarget(r)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.close()
	limit := int64(-1)
	if v := r.URL.Query().Get("max"); v != "" {
		if limit, err = strconv.ParseInt(v, 10, 64); err != nil || limit < 0 {
			writeError(w, fmt.Errorf("%w: max %q is not a byte count", errBadRequest, v))
			return
		}
	}
	f, err := t.fsys.OpenFile(t.name, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		writeError(w, t.wrap(err))
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
	case fi.IsDir():
		err = syscall.EISDIR
	case !fi.Mode().IsRegular():
		err = errNotRegular
	case limit >= 0 && fi.Size() > limit:
		err = &pathError{path: t.path, msg: fmt.Sprintf("file is %d bytes; the limit is %d", fi.Size(), limit), err: errTooLarge}
	}
	if err != nil {
		writeError(w, t.wrap(err))
		return
	}
	var body io.Reader = f
	if limit >= 0 {
		body = io.LimitReader(f, limit)
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("X-File-Mode", strconv.FormatUint(uint64(fi.Mode().Perm()), 8))
	_, _ = io.Copy(w, body)
}

func (s *Server) handleWriteFile(w http.ResponseWriter, r *http.Request) {
	t, err := s.queryTarget(r)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.close()
	mode := os.FileMode(0o644)
	if v := r.URL.Query().Get("mode"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o7777 {
			writeError(w, fmt.Errorf("%w: mode %q is not an octal permission", errBadRequest, v))
			return
		}
		mode = os.FileMode(m)
	}
	if err := writeFile(t, http.MaxBytesReader(w, r.Body, maxWriteBytes), mode); err != nil {
		writeError(w, t.wrap(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// writeFile writes atomically (temp file in the same directory, fsync,
// chmod, rename; parents created), except through a symlink: then the
// link's target is written in place, so the link stays a link. In the
// work dir the target must be in it too, or the write is refused. An
// existing pipe, socket or device is refused, never replaced or opened
// for writing (a pipe without a reader would block).
func writeFile(t *fileTarget, body io.Reader, mode os.FileMode) error {
	fi, err := t.fsys.Lstat(t.name)
	switch {
	case err == nil && fi.Mode()&fs.ModeSymlink != 0:
		return writeInPlace(t, body, mode)
	case err == nil && fi.IsDir():
		return syscall.EISDIR
	case err == nil && !fi.Mode().IsRegular():
		return errNotRegular
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return err
	}
	dir := filepath.Dir(t.name)
	if err := t.fsys.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	// The temp name does not grow with the file's name, so any name within
	// NAME_MAX can be written.
	tmpName := filepath.Join(dir, ".agentkernel-tmp-"+rand.Text()[:16])
	tmp, err := t.fsys.OpenFile(tmpName, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := fillAndClose(tmp, body, mode); err != nil {
		_ = t.fsys.Remove(tmpName)
		return err
	}
	if err := t.fsys.Rename(tmpName, t.name); err != nil {
		_ = t.fsys.Remove(tmpName)
		return err
	}
	return nil
}

func writeInPlace(t *fileTarget, body io.Reader, mode os.FileMode) error {
	f, err := t.fsys.OpenFile(t.name, os.O_WRONLY|os.O_CREATE|syscall.O_NONBLOCK, mode)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		if err == nil {
			err = errNotRegular
		}
		return err
	}
	if err := f.Truncate(0); err != nil {
		f.Close()
		return err
	}
	return fillAndClose(f, body, mode)
}

func fillAndClose(f *os.File, body io.Reader, mode os.FileMode) error {
	_, err := io.Copy(f, body)
	if err == nil {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func fileInfo(p string, fi fs.FileInfo) FileInfo {
	return FileInfo{
		Name:      fi.Name(),
		Path:      p,
		Size:      fi.Size(),
		Mode:      uint32(fi.Mode().Perm()),
		IsDir:     fi.IsDir(),
		IsSymlink: fi.Mode()&fs.ModeSymlink != 0,
		ModTime:   fi.ModTime(),
	}
}

func (s *Server) handleStat(w http.ResponseWriter, r *http.Request) {
	t, err := s.queryTarget(r)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.close()
	fi, err := t.fsys.Lstat(t.name)
	if err != nil {
		writeError(w, t.wrap(err))
		return
	}
	writeJSON(w, http.StatusOK, fileInfo(t.path, fi))
}

func (s *Server) handleListDir(w http.ResponseWriter, r *http.Request) {
	t, err := s.queryTarget(r)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.close()
	d, err := t.fsys.OpenFile(t.name, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_DIRECTORY, 0)
	if err != nil {
		writeError(w, t.wrap(err))
		return
	}
	entries, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		writeError(w, t.wrap(err))
		return
	}
	out := make([]FileInfo, 0, len(entries))
	for _, e := range entries {
		// The runtime's own records (op journal) are not the agent's files.
		if t.path == s.cfg.WorkDir && e.Name() == runtimeDirName {
			continue
		}
		// Lstat through the same tree, not e.Info(): that would stat by
		// host path name, outside the root.
		fi, err := t.fsys.Lstat(t.join(e.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while listing
		}
		if err != nil {
			writeError(w, t.wrap(err))
			return
		}
		out = append(out, fileInfo(filepath.Join(t.path, e.Name()), fi))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) {
	var req MkdirRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	t, err := s.target(req.Path)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.close()
	mode := os.FileMode(0o755)
	if req.Mode != 0 {
		mode = os.FileMode(req.Mode) & os.ModePerm
	}
	if err := t.fsys.MkdirAll(t.name, mode); err != nil {
		writeError(w, t.wrap(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRemove(w http.ResponseWriter, r *http.Request) {
	var req RemoveRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	t, err := s.target(req.Path)
	if err != nil {
		writeError(w, err)
		return
	}
	defer t.close()
	if t.path == "/" || t.path == s.cfg.WorkDir {
		writeError(w, fmt.Errorf("%w: refusing to remove %s itself", errBadRequest, t.path))
		return
	}
	// A final symlink is removed itself, never its target.
	if req.Recursive {
		err = t.fsys.RemoveAll(t.name)
	} else {
		err = t.fsys.Remove(t.name)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	if err != nil {
		writeError(w, t.wrap(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
