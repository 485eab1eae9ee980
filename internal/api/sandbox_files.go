package api

import (
	"errors"
	"io"
	"net/http"
	"path"
	"strconv"
	"strings"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// filePath turns the {path...} wildcard into a sandbox path: relative to
// /workspace unless absolute (send an absolute path URL-encoded,
// %2Fetc%2Fhostname). ".." anywhere — literal or encoded — is refused, so a
// request can never climb out of the directory it names.
func filePath(r *http.Request) (string, error) {
	p := r.PathValue("path")
	if p == "" {
		return "", BadRequest("a file path is required after /files/")
	}
	if strings.ContainsRune(p, 0) || strings.Contains(p, `\`) {
		return "", BadRequest("file path %q contains a NUL or a backslash", p)
	}
	for _, seg := range strings.Split(p, "/") {
		if seg == ".." {
			return "", BadRequest("file path %q contains \"..\"; paths may not climb out of the workspace", p)
		}
	}
	if !path.IsAbs(p) {
		p = path.Join(sandbox.WorkspacePath, p)
	}
	return path.Clean(p), nil
}

func (s *Server) fileError(w http.ResponseWriter, r *http.Request, id, p string, err error) {
	var ge *guest.Error
	switch {
	case guest.IsNotFound(err):
		s.writeError(w, r, NotFound("file", p))
	case errors.As(err, &ge) && ge.Status >= 400 && ge.Status < 500:
		s.writeError(w, r, Errorf(ge.Status, TypeInvalidRequest, "%s: %s", p, ge.Message))
	default:
		s.writeError(w, r, sandboxError(id, err))
	}
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := filePath(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tenant := PrincipalFrom(r.Context()).TenantID
	fi, err := s.sandboxes.Stat(r.Context(), tenant, id, p)
	if err != nil {
		s.fileError(w, r, id, p, err)
		return
	}
	if fi.IsDir {
		list, err := s.sandboxes.ListDir(r.Context(), tenant, id, p)
		if err != nil {
			s.fileError(w, r, id, p, err)
			return
		}
		if list == nil {
			list = []guest.FileInfo{}
		}
		writeJSON(w, http.StatusOK, listJSON[guest.FileInfo]{Data: list})
		return
	}
	if fi.Size > s.maxFile {
		s.writeError(w, r, Errorf(http.StatusRequestEntityTooLarge, TypeRequestTooLarge,
			"file %s is %d bytes; the limit is %d bytes (sandbox.max_file_bytes)", p, fi.Size, s.maxFile))
		return
	}
	b, err := s.sandboxes.ReadFile(r.Context(), tenant, id, p)
	if err != nil {
		s.fileError(w, r, id, p, err)
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.Header().Set("X-File-Mode", strconv.FormatUint(uint64(fi.Mode), 8))
	_, _ = w.Write(b)
}

func (s *Server) writeFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := filePath(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var mode uint32 = 0o644
	if m := r.URL.Query().Get("mode"); m != "" {
		v, err := strconv.ParseUint(m, 8, 32)
		if err != nil || v > 0o7777 {
			s.writeError(w, r, BadRequest("query parameter \"mode\" must be octal permission bits such as 644, got %q", m))
			return
		}
		mode = uint32(v)
	}
	if r.ContentLength > s.maxFile {
		s.writeError(w, r, Errorf(http.StatusRequestEntityTooLarge, TypeRequestTooLarge,
			"file body is %d bytes; the limit is %d bytes (sandbox.max_file_bytes)", r.ContentLength, s.maxFile))
		return
	}
	// The server-wide body limit is for JSON; files have their own.
	body := http.MaxBytesReader(w, r.Body, s.maxFile)
	data, err := io.ReadAll(body)
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		s.writeError(w, r, Errorf(http.StatusRequestEntityTooLarge, TypeRequestTooLarge,
			"file body exceeds the limit of %d bytes (sandbox.max_file_bytes)", s.maxFile))
		return
	}
	if err != nil {
		s.writeError(w, r, BadRequest("reading the request body: %v", err))
		return
	}
	if err := s.sandboxes.WriteFile(r.Context(), PrincipalFrom(r.Context()).TenantID, id, p, data, mode); err != nil {
		s.fileError(w, r, id, p, err)
		return
	}
	writeJSON(w, http.StatusCreated, map[string]any{"path": p, "size": len(data), "mode": strconv.FormatUint(uint64(mode), 8)})
}

func (s *Server) removeFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := filePath(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	recursive := r.URL.Query().Get("recursive") == "true"
	if err := s.sandboxes.Remove(r.Context(), PrincipalFrom(r.Context()).TenantID, id, p, recursive); err != nil {
		s.fileError(w, r, id, p, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
