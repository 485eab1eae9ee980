package console

import (
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// A session's output files (what its agent wrote to /mnt/session/outputs,
// Files scoped to the session): listed on its page, downloaded through
// the Files API.

// outputFileJSON is a file of the Files API (a session output).
type outputFileJSON struct {
	ID        string    `json:"id"`
	Filename  string    `json:"filename"`
	SizeBytes int64     `json:"size_bytes"`
	CreatedAt time.Time `json:"created_at"`
	Scope     *struct {
		Type string `json:"type"`
		ID   string `json:"id"`
	} `json:"scope"`
}

// maxListedFiles bounds the output files a session page lists.
const maxListedFiles = 100

// sessionFiles are the newest output files of a session, and whether it
// has more.
func (c *Console) sessionFiles(r *http.Request, u *user, id string) ([]outputFileJSON, bool, error) {
	var list struct {
		Data    []outputFileJSON `json:"data"`
		HasMore bool             `json:"has_more"`
		Next    string           `json:"next_page"`
	}
	q := url.Values{"scope_id": {id}, "limit": {fmt.Sprint(maxListedFiles)}}
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/files", q, nil, &list); err != nil {
		return nil, false, err
	}
	return list.Data, list.HasMore || list.Next != "", nil
}

// sessionFile downloads an output file of the session: the API's
// /v1/files/{id}/content passed through as an attachment (never shown
// inline: a file the agent wrote is not a page of the console). A file
// of another session is not found here.
func (c *Console) sessionFile(w http.ResponseWriter, r *http.Request, u *user) {
	id, fid := r.PathValue("id"), r.PathValue("file")
	var f outputFileJSON
	if err := c.call(r.Context(), u, http.MethodGet, "/v1/files/"+url.PathEscape(fid), nil, nil, &f); err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	if f.Scope == nil || f.Scope.Type != "session" || f.Scope.ID != id {
		c.fail(w, r, u, http.StatusNotFound, "Not found (or not yours to see).")
		return
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/v1/files/"+url.PathEscape(fid)+"/content", http.NoBody)
	if err != nil {
		c.failAPI(w, r, u, err)
		return
	}
	req.Header.Set("x-api-key", u.secret)
	req.Header.Set("User-Agent", "agentkernel-console")
	if rg := r.Header.Get("Range"); rg != "" {
		req.Header.Set("Range", rg)
	}
	dw := &downloadWriter{w: w, header: http.Header{}, name: f.Filename}
	c.o.API.ServeHTTP(dw, req)
	if dw.status == 0 {
		dw.WriteHeader(http.StatusOK)
	}
	if dw.errBody != nil {
		c.failAPI(w, r, u, decodeAPIError(dw.status, dw.errBody))
	}
}

// downloadWriter passes a file's content through with the API's headers
// that describe it, as an attachment; an error answer is kept for the
// console to show instead.
type downloadWriter struct {
	w       http.ResponseWriter
	header  http.Header
	name    string
	status  int
	errBody []byte
}

func (d *downloadWriter) Header() http.Header { return d.header }

func (d *downloadWriter) WriteHeader(code int) {
	if d.status != 0 {
		return
	}
	d.status = code
	if code >= 400 {
		d.errBody = []byte{}
		return
	}
	h := d.w.Header()
	for _, k := range []string{"Content-Length", "Content-Range", "Accept-Ranges", "Last-Modified", "ETag"} {
		if v := d.header.Get(k); v != "" {
			h.Set(k, v)
		}
	}
	// The content is the agent's: the browser must not run or render it
	// here, whatever its type says.
	h.Set("Content-Type", "application/octet-stream")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": d.name[strings.LastIndex(d.name, "/")+1:]}))
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	d.w.WriteHeader(code)
}

func (d *downloadWriter) Write(b []byte) (int, error) {
	d.WriteHeader(http.StatusOK)
	if d.errBody != nil {
		if len(d.errBody) < 1<<20 {
			d.errBody = append(d.errBody, b...)
		}
		return len(b), nil
	}
	return d.w.Write(b)
}

// Flush passes a flush on (a large file streams).
func (d *downloadWriter) Flush() {
	if f, ok := d.w.(http.Flusher); ok && d.errBody == nil {
		f.Flush()
	}
}

// byteSize is a size for people: 1536 → "1.5 KiB".
func byteSize(n int64) string {
	switch {
	case n >= 1<<30:
		return fmt.Sprintf("%.1f GiB", float64(n)/(1<<30))
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
