package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// The console's API client: requests to the public API, served in process
// with the logged-in user's key.

// apiError is an error answer of the API.
type apiError struct {
	Status  int
	Type    string
	Message string
}

func (e *apiError) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

// call sends one request to the API and decodes its JSON answer into out
// (when not nil).
func (c *Console) call(ctx context.Context, u *user, method, path string, query url.Values, body, out any) error {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	rec, err := c.raw(ctx, u, method, path, query, rd)
	if err != nil {
		return err
	}
	if out == nil {
		return nil
	}
	if err := json.Unmarshal(rec.body.Bytes(), out); err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	return nil
}

// raw sends one request to the API and returns its answer as is; an error
// answer is an *apiError.
func (c *Console) raw(ctx context.Context, u *user, method, path string, query url.Values, body io.Reader) (*recorder, error) {
	target := path
	if len(query) > 0 {
		target += "?" + query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, method, target, body)
	if err != nil {
		return nil, err
	}
	inProcess(req)
	req.Header.Set("x-api-key", u.secret)
	req.Header.Set("User-Agent", "agentkernel-console")
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := &recorder{header: http.Header{}}
	c.o.API.ServeHTTP(rec, req)
	if rec.status == 0 {
		rec.status = http.StatusOK
	}
	if rec.status/100 != 2 {
		return nil, decodeAPIError(rec.status, rec.body.Bytes())
	}
	return rec, nil
}

// inProcess makes a client request look as the server's handlers expect
// one from the network: a body that is never nil, a remote address.
func inProcess(req *http.Request) {
	if req.Body == nil {
		req.Body = http.NoBody
	}
	req.RemoteAddr = "console"
	req.RequestURI = req.URL.RequestURI()
}

func decodeAPIError(status int, b []byte) error {
	var env struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	_ = json.Unmarshal(b, &env)
	if env.Error.Message == "" {
		env.Error.Message = strings.TrimSpace(string(b))
	}
	return &apiError{Status: status, Type: env.Error.Type, Message: env.Error.Message}
}

// recorder keeps an API answer in memory.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (r *recorder) Header() http.Header { return r.header }
func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
}
func (r *recorder) Write(b []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	return r.body.Write(b)
}

// sseEvent is one event of an API stream.
type sseEvent struct {
	ID, Type string
	Data     []byte
}

// stream follows an SSE route of the API (from lastID when set) and calls
// fn for each event until ctx ends, the stream ends or fn fails.
func (c *Console) stream(ctx context.Context, u *user, path, lastID string, fn func(sseEvent) error) error {
	return c.streamRequest(ctx, u, http.MethodGet, path, nil, lastID, fn)
}

// streamRequest is stream for any method, with a JSON body when not nil.
func (c *Console) streamRequest(ctx context.Context, u *user, method, path string, body any, lastID string, fn func(sseEvent) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, path, rd)
	if err != nil {
		return err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	inProcess(req)
	req.Header.Set("x-api-key", u.secret)
	req.Header.Set("Accept", "text/event-stream")
	req.Header.Set("User-Agent", "agentkernel-console")
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	pr, pw := io.Pipe()
	w := &pipeWriter{header: http.Header{}, pw: pw, started: make(chan int, 1)}
	go func() {
		c.o.API.ServeHTTP(w, req)
		w.WriteHeader(http.StatusOK)
		pw.Close()
	}()
	defer pr.Close()
	if status := <-w.started; status != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(pr, 1<<20))
		return decodeAPIError(status, b)
	}
	sc := bufio.NewScanner(pr)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var ev sseEvent
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == "":
			if ev.Data != nil && ev.Type != "ping" {
				if err := fn(ev); err != nil {
					return err
				}
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, "id: "):
			ev.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.Type = line[7:]
		case strings.HasPrefix(line, "data: "):
			ev.Data = append(ev.Data, line[6:]...)
		}
	}
	return sc.Err()
}

// pipeWriter hands an API answer to a reader as it is written.
type pipeWriter struct {
	header  http.Header
	pw      *io.PipeWriter
	once    sync.Once
	started chan int
}

func (w *pipeWriter) Header() http.Header { return w.header }
func (w *pipeWriter) WriteHeader(code int) {
	w.once.Do(func() { w.started <- code })
}
func (w *pipeWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.pw.Write(b)
}

// Flush: everything written is already with the reader.
func (w *pipeWriter) Flush() {}
