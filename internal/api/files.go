package api

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/files"
	"github.com/agentkernel/agentkernel/internal/store"
)

// The Files API (/v1/files), wire-compatible with anthropic-sdk-go's
// Beta.Files: upload (multipart, streamed into the blob store), list with
// the SDK's cursor page (page/limit/next_page; before_id/after_id with
// has_more/first_id/last_id too, as the hosted API answers), metadata,
// download (/content, ranged) and delete.

// Expiry bounds of expires_in_seconds (the SDK's "between 3600 (one hour)
// and 7776000 (ninety days)").
const (
	minFileExpiry = 3600
	maxFileExpiry = 7776000
	// maxFileIDs bounds the ids filter (the SDK's "at most 100 entries").
	maxFileIDs = 100
)

type filesAPI struct {
	*Server
	files *files.Service
}

func (s *Server) registerFileRoutes(fs *files.Service) {
	f := &filesAPI{Server: s, files: fs}
	a := s.authenticated
	s.mux.HandleFunc("POST /v1/files", a(s.noQuery(f.upload)))
	s.mux.HandleFunc("GET /v1/files", a(s.query(f.list, "limit", "page", "scope_id", "ids", "before_id", "after_id")))
	s.mux.HandleFunc("GET /v1/files/{id}", a(s.noQuery(f.get)))
	s.mux.HandleFunc("GET /v1/files/{id}/content", a(s.noQuery(f.content)))
	s.mux.HandleFunc("DELETE /v1/files/{id}", a(s.noQuery(f.delete)))
}

// isFileUpload: POST /v1/files takes bodies up to [files] max_upload_bytes.
func isFileUpload(r *http.Request) bool {
	return r.Method == http.MethodPost && strings.TrimSuffix(r.URL.Path, "/") == "/v1/files"
}

// uploadBodyLimit is the outer limit of an upload's whole body: the file
// plus room for the multipart framing and the small fields. The file's
// own limit (the service's) is exact and names the setting.
func uploadBodyLimit(max int64) int64 { return max + 1<<20 }

func fileJSON(f *store.File) map[string]any {
	out := map[string]any{
		"id": f.ID, "type": "file", "filename": f.Filename, "mime_type": f.MimeType, "size_bytes": f.SizeBytes,
		"created_at": timeJSON(f.CreatedAt), "downloadable": f.Downloadable, "expires_at": timePtrJSON(f.ExpiresAt), "scope": nil,
	}
	if f.ScopeSessionID != "" {
		out["scope"] = map[string]any{"type": "session", "id": f.ScopeSessionID}
	}
	return out
}

func (f *filesAPI) tooLarge() *Error {
	return Errorf(http.StatusRequestEntityTooLarge, TypeRequestTooLarge,
		"file is larger than [files] max_upload_bytes (%d bytes); raise it in the daemon's config or upload a smaller file", f.files.MaxBytes())
}

// upload reads the multipart body part by part: the "file" part streams
// into the blob store as it arrives (never parsed into memory or a temp
// file, as ParseMultipartForm would); the row is written once every part
// was read, so a field after the file (expires_in_seconds, as the SDK
// orders them) still counts.
func (f *filesAPI) upload(w http.ResponseWriter, r *http.Request) {
	mr, err := r.MultipartReader()
	if err != nil {
		f.writeError(w, r, BadRequest("the body must be multipart/form-data with a \"file\" part: %v", err))
		return
	}
	var (
		staged *files.Staged
		ttl    time.Duration
	)
	defer func() {
		if staged != nil {
			staged.Abort()
		}
	}()
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			f.writeError(w, r, f.bodyError(err, "malformed multipart body"))
			return
		}
		switch name := part.FormName(); name {
		case "file":
			if staged != nil {
				f.writeError(w, r, BadRequest("multipart body has two \"file\" parts; upload one file per request"))
				return
			}
			staged, err = f.files.Stage(r.Context(), tenant(r), files.CreateParams{
				Filename: part.FileName(), MimeType: part.Header.Get("Content-Type"), Body: part,
			})
			if err != nil {
				f.writeError(w, r, f.bodyError(err, "read the \"file\" part"))
				return
			}
		case "expires_in_seconds":
			v, err := io.ReadAll(io.LimitReader(part, 32))
			if err != nil {
				f.writeError(w, r, f.bodyError(err, "read expires_in_seconds"))
				return
			}
			n, err := strconv.ParseInt(strings.TrimSpace(string(v)), 10, 64)
			if err != nil || n < minFileExpiry || n > maxFileExpiry {
				f.writeError(w, r, BadRequest("expires_in_seconds must be an integer from %d to %d, got %q", minFileExpiry, maxFileExpiry, v))
				return
			}
			ttl = time.Duration(n) * time.Second
		default:
			f.writeError(w, r, BadRequest("unknown multipart field %q (accepted: file, expires_in_seconds)", name))
			return
		}
	}
	if staged == nil {
		f.writeError(w, r, BadRequest("multipart body has no \"file\" part: file is required"))
		return
	}
	out, err := staged.Commit(r.Context(), ttl)
	staged = nil
	if err != nil {
		f.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, fileJSON(out))
}

// bodyError maps what reading an upload can fail with: the size limits
// (413 naming the setting), a malformed body (400); anything else is the
// server's.
func (f *filesAPI) bodyError(err error, what string) error {
	var mbe *http.MaxBytesError
	switch {
	case errors.Is(err, files.ErrTooLarge), errors.As(err, &mbe):
		return f.tooLarge()
	case isMultipartError(err):
		return BadRequest("%s: %v", what, err)
	}
	return err
}

// isMultipartError tells a body the client got wrong (mime/multipart's
// parse errors, a body that ended early) from a server failure.
func isMultipartError(err error) bool {
	if errors.Is(err, io.ErrUnexpectedEOF) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "multipart:") || strings.Contains(s, "malformed MIME header")
}

func (f *filesAPI) fileFor(r *http.Request) (*store.File, error) {
	id := r.PathValue("id")
	out, err := f.files.Get(r.Context(), tenant(r), id)
	if err != nil {
		return nil, notFoundAs("file", id, err)
	}
	return out, nil
}

func (f *filesAPI) get(w http.ResponseWriter, r *http.Request) {
	out, err := f.fileFor(r)
	if err != nil {
		f.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, fileJSON(out))
}

func (f *filesAPI) delete(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	if err := f.files.Delete(r.Context(), tenant(r), id); err != nil {
		f.writeError(w, r, notFoundAs("file", id, err))
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"id": id, "type": "file_deleted"})
}

// list answers the SDK's PageCursor (data, next_page) newest first, and
// the hosted API's id cursor fields (has_more, first_id, last_id) for
// clients that page with before_id/after_id.
func (f *filesAPI) list(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	p := store.ListFilesParams{TenantID: tenant(r), ScopeSessionID: q.Get("scope_id"), Descending: true}
	idList := queryList(q, "ids")
	if len(idList) > 0 {
		for _, name := range []string{"page", "limit", "before_id", "after_id"} {
			if q.Has(name) {
				f.writeError(w, r, BadRequest("query parameters \"ids\" and %q are mutually exclusive: an ids listing is one page", name))
				return
			}
		}
		seen := map[string]bool{}
		for _, id := range idList {
			if !seen[id] {
				seen[id] = true
				p.IDs = append(p.IDs, id)
			}
		}
		if len(p.IDs) > maxFileIDs {
			f.writeError(w, r, BadRequest("query parameter \"ids\" lists %d files; at most %d", len(p.IDs), maxFileIDs))
			return
		}
	}
	pq, err := parsePageQuery(q, 20, 1000, true)
	if err != nil {
		f.writeError(w, r, err)
		return
	}
	limit := pq.limit
	if n := boolCount(pq.cursor != "", q.Get("before_id") != "", q.Get("after_id") != ""); n > 1 {
		f.writeError(w, r, BadRequest("query parameters \"page\", \"before_id\" and \"after_id\" are mutually exclusive"))
		return
	}
	// Newest first: the next page (page cursor, after_id) holds older
	// files, ids below the cursor; before_id asks for newer ones.
	p.BeforeID = pq.cursor
	if v := q.Get("after_id"); v != "" {
		p.BeforeID = v
	}
	newer := q.Get("before_id")
	if newer != "" {
		p.AfterID, p.Descending = newer, false
	}
	if len(p.IDs) == 0 {
		p.Limit = limit + 1
	}
	fs, err := f.files.List(r.Context(), p)
	if err != nil {
		f.writeError(w, r, err)
		return
	}
	more := len(p.IDs) == 0 && len(fs) > limit
	if more {
		fs = fs[:limit]
	}
	if newer != "" { // read oldest-first above the cursor; answer newest first
		for i, j := 0, len(fs)-1; i < j; i, j = i+1, j-1 {
			fs[i], fs[j] = fs[j], fs[i]
		}
	}
	data := make([]map[string]any, 0, len(fs))
	for _, x := range fs {
		data = append(data, fileJSON(x))
	}
	out := map[string]any{"data": data, "next_page": nil, "has_more": more, "first_id": nil, "last_id": nil}
	if len(fs) > 0 {
		out["first_id"], out["last_id"] = fs[0].ID, fs[len(fs)-1].ID
		if more && newer == "" {
			out["next_page"] = encodeCursor(fs[len(fs)-1].ID)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func boolCount(bs ...bool) int {
	n := 0
	for _, b := range bs {
		if b {
			n++
		}
	}
	return n
}

// content streams the file's bytes. A single "bytes=" range is served as
// 206 (416 when it starts past the end); several ranges get the whole
// file, which RFC 9110 allows.
func (f *filesAPI) content(w http.ResponseWriter, r *http.Request) {
	file, err := f.fileFor(r)
	if err != nil {
		f.writeError(w, r, err)
		return
	}
	if !file.Downloadable {
		f.writeError(w, r, BadRequest("file %q is not downloadable (downloadable is false: files uploaded through the API are not served back; files a session produced are)", file.ID))
		return
	}
	start, length, ranged, err := parseRange(r.Header.Get("Range"), file.SizeBytes)
	if err != nil {
		w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", file.SizeBytes))
		f.writeError(w, r, Errorf(http.StatusRequestedRangeNotSatisfiable, TypeInvalidRequest, "%v", err))
		return
	}
	rc, _, err := f.files.Open(r.Context(), tenant(r), file.ID)
	if err != nil {
		f.writeError(w, r, notFoundAs("file", file.ID, err))
		return
	}
	defer rc.Close()
	if start > 0 {
		// The blob reader is a stream; skip to the range's start.
		if _, err := io.CopyN(io.Discard, rc, start); err != nil {
			f.writeError(w, r, err)
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", file.MimeType)
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": file.Filename}))
	h.Set("Accept-Ranges", "bytes")
	h.Set("Content-Length", strconv.FormatInt(length, 10))
	h.Set("ETag", `"`+file.SHA256+`"`)
	status := http.StatusOK
	if ranged {
		h.Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", start, start+length-1, file.SizeBytes))
		status = http.StatusPartialContent
	}
	w.WriteHeader(status)
	if r.Method == http.MethodHead {
		return
	}
	var body io.Reader = rc
	if ranged {
		body = io.LimitReader(rc, length)
	}
	if _, err := io.Copy(w, body); err != nil {
		// Headers are sent; the client sees a short body.
		f.log.WarnContext(r.Context(), "file download cut off", "file", file.ID, "err", err)
	}
}

// parseRange reads a Range header for a body of size bytes: none or
// several ranges → the whole body; one satisfiable range → its start and
// length; one that starts at or past the end → an error (416).
func parseRange(h string, size int64) (start, length int64, ranged bool, err error) {
	if h == "" || !strings.HasPrefix(h, "bytes=") || strings.Contains(h, ",") {
		return 0, size, false, nil
	}
	spec := strings.TrimSpace(strings.TrimPrefix(h, "bytes="))
	first, last, ok := strings.Cut(spec, "-")
	if !ok {
		return 0, size, false, nil
	}
	if first == "" { // suffix: the last N bytes
		n, perr := strconv.ParseInt(last, 10, 64)
		if perr != nil || n < 0 {
			return 0, size, false, nil
		}
		if n == 0 || size == 0 {
			return 0, 0, false, fmt.Errorf("range %q selects no bytes of a %d-byte file", h, size)
		}
		n = min(n, size)
		return size - n, n, true, nil
	}
	s, perr := strconv.ParseInt(first, 10, 64)
	if perr != nil || s < 0 {
		return 0, size, false, nil
	}
	if s >= size {
		return 0, 0, false, fmt.Errorf("range %q starts at or past the end of the %d-byte file", h, size)
	}
	e := size - 1
	if last != "" {
		v, perr := strconv.ParseInt(last, 10, 64)
		if perr != nil || v < s {
			return 0, size, false, nil
		}
		e = min(v, size-1)
	}
	return s, e - s + 1, true, nil
}
