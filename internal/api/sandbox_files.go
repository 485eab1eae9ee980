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

// filePath turns the {path...} wildcard into a sandbox path. A relative
// path is relative to /workspace; an absolute one (its leading slash sent
// URL-encoded, %2Ftmp%2Fx) names that path in the sandbox, as exec sees
// it: the sandbox is the boundary, and the files API reaches nothing exec
// could not. ".." anywhere — literal or encoded — is refused, so a request
// never climbs out of the directory it names, and a workspace path never
// follows a symlink out of /workspace (the guest resolves it in an
// os.Root). Names over NAME_MAX and paths over PATH_MAX are refused here,
// before a sandbox is woken for a request that cannot succeed.
func filePath(r *http.Request) (string, error) {
	p := r.PathValue("path")
	if p == "" {
		return "", BadRequest("a file path is required after /files/")
	}
	if strings.Contains(p, `\`) {
		return "", BadRequest("file path %q contains a backslash", p)
	}
	if err := guest.CheckPath(p); err != nil {
		return "", BadRequest("file %v", err)
	}
	if !path.IsAbs(p) {
		p = path.Join(sandbox.WorkspacePath, p)
	}
	p = path.Clean(p)
	if err := guest.CheckPath(p); err != nil {
		return "", BadRequest("file %v", err)
	}
	return p, nil
}

// fileError maps the guest's answer to the caller: what the guest says of
// the path (not found, not writable, a loop, a full disk, …) keeps its
// status and message; anything else is the sandbox's failure.
func (s *Server) fileError(w http.ResponseWriter, r *http.Request, id, p string, err error) {
	var ge *guest.Error
	switch {
	case guest.IsNotFound(err):
		s.writeError(w, r, NotFound("file", p))
	case errors.As(err, &ge) && (ge.Status/100 == 4 || ge.Status == http.StatusInsufficientStorage):
		s.writeError(w, r, Errorf(ge.Status, fileErrorType(ge.Status), "%s", ge.Message))
	default:
		s.writeError(w, r, sandboxError(id, err))
	}
}

func fileErrorType(status int) string {
	switch status {
	case http.StatusForbidden:
		return TypePermission
	case http.StatusNotFound:
		return TypeNotFound
	case http.StatusConflict:
		return TypeConflict
	case http.StatusRequestEntityTooLarge:
		return TypeRequestTooLarge
	case http.StatusInsufficientStorage:
		return TypeAPI
	}
	return TypeInvalidRequest
}

func (s *Server) readFile(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	p, err := filePath(r)
	if err == nil {
		err = checkQuery(r.URL.Query())
	}
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
	// The stat above is of the path itself; through a symlink, or for a
	// file that grew since, the read is bounded on its own.
	b, err := s.sandboxes.ReadFileMax(r.Context(), tenant, id, p, s.maxFile)
	var ge *guest.Error
	if errors.As(err, &ge) && ge.Status == http.StatusRequestEntityTooLarge {
		err = Errorf(http.StatusRequestEntityTooLarge, TypeRequestTooLarge,
			"file %s is larger than %d bytes, the limit (sandbox.max_file_bytes)", p, s.maxFile)
	}
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
	if err == nil {
		err = checkQuery(r.URL.Query(), "mode")
	}
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
	if err == nil {
		err = checkQuery(r.URL.Query(), "recursive")
	}
	var recursive bool
	if err == nil {
		recursive, err = queryBool(r.URL.Query(), "recursive")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if err := s.sandboxes.Remove(r.Context(), PrincipalFrom(r.Context()).TenantID, id, p, recursive); err != nil {
		s.fileError(w, r, id, p, err)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
