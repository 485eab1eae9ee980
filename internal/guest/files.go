package guest

import (
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

func (s *Server) pathParam(r *http.Request) (string, error) {
	p := r.URL.Query().Get("path")
	if p == "" {
		return "", fmt.Errorf("%w: path is required", errBadRequest)
	}
	return s.resolve(p), nil
}

func (s *Server) handleReadFile(w http.ResponseWriter, r *http.Request) {
	p, err := s.pathParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	f, err := os.Open(p)
	if err != nil {
		writeError(w, err)
		return
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		writeError(w, err)
		return
	}
	if fi.IsDir() {
		writeError(w, fmt.Errorf("read %s: %w", p, syscall.EISDIR))
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(fi.Size(), 10))
	w.Header().Set("X-File-Mode", strconv.FormatUint(uint64(fi.Mode().Perm()), 8))
	_, _ = io.Copy(w, f)
}

// handleWriteFile writes atomically: a temp file in the same directory,
// fsync, chmod, rename. Parents are created.
func (s *Server) handleWriteFile(w http.ResponseWriter, r *http.Request) {
	p, err := s.pathParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	mode := os.FileMode(0o644)
	if v := r.URL.Query().Get("mode"); v != "" {
		m, err := strconv.ParseUint(v, 8, 32)
		if err != nil || m > 0o7777 {
			writeError(w, fmt.Errorf("%w: mode %q is not an octal permission", errBadRequest, v))
			return
		}
		mode = os.FileMode(m)
	}
	if err := writeAtomic(p, http.MaxBytesReader(w, r.Body, maxWriteBytes), mode); err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func writeAtomic(p string, body io.Reader, mode os.FileMode) (err error) {
	if fi, err := os.Stat(p); err == nil && fi.IsDir() {
		return fmt.Errorf("write %s: %w", p, syscall.EISDIR)
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(p)+".tmp-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	if _, err = io.Copy(tmp, body); err != nil {
		return err
	}
	if err = tmp.Chmod(mode); err != nil {
		return err
	}
	if err = tmp.Sync(); err != nil {
		return err
	}
	if err = tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
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
	p, err := s.pathParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	fi, err := os.Lstat(p)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, fileInfo(p, fi))
}

func (s *Server) handleListDir(w http.ResponseWriter, r *http.Request) {
	p, err := s.pathParam(r)
	if err != nil {
		writeError(w, err)
		return
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		writeError(w, err)
		return
	}
	out := make([]FileInfo, 0, len(entries))
	for _, e := range entries {
		fi, err := e.Info()
		if errors.Is(err, fs.ErrNotExist) {
			continue // removed while listing
		}
		if err != nil {
			writeError(w, err)
			return
		}
		out = append(out, fileInfo(filepath.Join(p, e.Name()), fi))
	}
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleMkdir(w http.ResponseWriter, r *http.Request) {
	var req MkdirRequest
	if err := decodeJSON(r, &req); err != nil {
		writeError(w, err)
		return
	}
	if req.Path == "" {
		writeError(w, fmt.Errorf("%w: path is required", errBadRequest))
		return
	}
	mode := os.FileMode(0o755)
	if req.Mode != 0 {
		mode = os.FileMode(req.Mode) & os.ModePerm
	}
	if err := os.MkdirAll(s.resolve(req.Path), mode); err != nil {
		writeError(w, err)
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
	if req.Path == "" {
		writeError(w, fmt.Errorf("%w: path is required", errBadRequest))
		return
	}
	p := s.resolve(req.Path)
	if p == "/" || p == s.cfg.WorkDir {
		writeError(w, fmt.Errorf("%w: refusing to remove %s", errBadRequest, p))
		return
	}
	var err error
	if req.Recursive {
		err = os.RemoveAll(p)
	} else {
		err = os.Remove(p)
		if errors.Is(err, fs.ErrNotExist) {
			err = nil
		}
	}
	if err != nil {
		writeError(w, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
