package agentkernel

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// Error is an error answered by the API: its HTTP status, the envelope's
// error type (e.g. "invalid_request_error", "not_found_error") and message.
type Error struct {
	StatusCode int
	Type       string
	Message    string
	RequestID  string
}

func (e *Error) Error() string {
	return fmt.Sprintf("agentkernel: %d %s: %s", e.StatusCode, e.Type, e.Message)
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

func decodeError(resp *http.Response) error {
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &Error{StatusCode: resp.StatusCode, RequestID: resp.Header.Get("request-id")}
	var env envelope
	if json.Unmarshal(b, &env) == nil && env.Error.Type != "" {
		e.Type, e.Message = env.Error.Type, env.Error.Message
		if env.RequestID != "" {
			e.RequestID = env.RequestID
		}
	} else {
		e.Type, e.Message = "api_error", string(b)
	}
	return e
}
