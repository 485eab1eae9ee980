package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
)

type ctxKey int

const (
	ctxRequestID ctxKey = iota
	ctxPrincipal
)

// requestID returns the request's id ("" outside a request).
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(ctxRequestID).(string)
	return id
}

func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// statusWriter records the status for logs and metrics.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

// Flush lets streaming handlers (SSE) flush through the wrapper.
func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the real writer.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// bodyLimit is server.max_body_bytes for JSON requests; file and bundle
// uploads have their own, larger limits (sandbox.max_file_bytes,
// durable_objects.max_bundle_bytes), enforced by their handlers with a
// message naming them.
func (s *Server) bodyLimit(r *http.Request) int64 {
	if r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/sandboxes/") && strings.Contains(r.URL.Path, "/files/") {
		return max(s.maxBody, s.maxFile+1)
	}
	if s.objects != nil && isBundleUpload(r) {
		return max(s.maxBody, s.objects.MaxBundleBytes()+1)
	}
	if s.files != nil && isFileUpload(r) {
		return max(s.maxBody, uploadBodyLimit(s.files.MaxBytes()))
	}
	if s.skillUploads > 0 && isSkillUpload(r) {
		return max(s.maxBody, s.skillUploads+multipartSlack)
	}
	return s.maxBody
}

// instrument is the outermost middleware: request id, body limit, panic
// recovery, access log and metrics.
func (s *Server) instrument(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		id := newRequestID()
		w.Header().Set("request-id", id)
		r = r.WithContext(context.WithValue(r.Context(), ctxRequestID, id))
		if r.Body != nil {
			r.Body = http.MaxBytesReader(w, r.Body, s.bodyLimit(r))
		}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				s.log.ErrorContext(r.Context(), "handler panic", "panic", p, "stack", string(debug.Stack()), "request_id", id)
				if sw.status == 0 {
					s.writeError(sw, r, Errorf(http.StatusInternalServerError, TypeAPI, "internal error; see the daemon log for request %s", id))
				}
			}
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			code := strconv.Itoa(sw.status)
			s.metrics.requests.WithLabelValues(r.Method, route, code).Inc()
			s.metrics.duration.WithLabelValues(r.Method, route).Observe(time.Since(start).Seconds())
			s.log.LogAttrs(r.Context(), levelFor(sw.status), "request",
				slogStr("method", r.Method), slogStr("path", r.URL.Path), slogInt("status", sw.status),
				slogDur("duration", time.Since(start)), slogStr("request_id", id))
		}()
		next.ServeHTTP(sw, r)
	})
}
