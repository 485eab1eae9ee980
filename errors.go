package agentkernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Error is an error answered by the API: its HTTP status, the envelope's
// error type (e.g. "invalid_request_error", "not_found_error") and message.
type Error struct {
	StatusCode int
	Type       string
	Message    string
	RequestID  string
}

// Error reads "<the API's message> (HTTP 404 not_found_error)": the cause
// first and once, with no package prefix, so a caller that adds its own
// context ("agentkernel sandbox: …") does not repeat one.
func (e *Error) Error() string {
	if e.Message == "" {
		return fmt.Sprintf("HTTP %d %s", e.StatusCode, e.Type)
	}
	return fmt.Sprintf("%s (HTTP %d %s)", e.Message, e.StatusCode, e.Type)
}

// IsNotFound reports whether err is an API 404.
func IsNotFound(err error) bool {
	var e *Error
	return errors.As(err, &e) && e.StatusCode == http.StatusNotFound
}

// envelope is the JSON error envelope every API error uses.
type envelope struct {
	Type  string `json:"type"`
	Error struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	RequestID string `json:"request_id"`
}

// ok reports whether an answer is a success. Anything else — a 3xx
// included — is an error: API calls never follow redirects, because a
// followed (or silently accepted) redirect sends the request somewhere
// other than where the caller asked, as ServeMux's path cleaning does with
// "files/../../x".
func ok(resp *http.Response) bool { return resp.StatusCode >= 200 && resp.StatusCode <= 299 }

// decodeError turns a non-2xx answer into an *Error.
func decodeError(resp *http.Response) error {
	e := &Error{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("request-id")}
	if resp.StatusCode >= 300 && resp.StatusCode <= 399 {
		e.Type = "unexpected_redirect"
		e.Message = fmt.Sprintf("%s %s was answered with a redirect to %q; the agentkernel API never redirects, so the request did not reach its endpoint (a path with \".\" or \"..\" segments, or a wrong --url / AGENTKERNEL_URL?)",
			resp.Request.Method, resp.Request.URL.EscapedPath(), resp.Header.Get("Location"))
		return e
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	var env envelope
	if json.Unmarshal(b, &env) == nil && env.Error.Type != "" {
		e.Type, e.Message = env.Error.Type, env.Error.Message
		if env.RequestID != "" {
			e.RequestID = env.RequestID
		}
	} else {
		e.Type, e.Message = "api_error", strings.TrimSpace(string(b))
	}
	return e
}
