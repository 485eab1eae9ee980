package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Error types of the envelope (the Anthropic API's names, so the official
// SDKs map them).
const (
	TypeInvalidRequest  = "invalid_request_error"
	TypeAuthentication  = "authentication_error"
	TypePermission      = "permission_error"
	TypeNotFound        = "not_found_error"
	TypeConflict        = "conflict_error"
	TypeRequestTooLarge = "request_too_large"
	TypeAPI             = "api_error"
	TypeUnavailable     = "sandbox_unavailable"
)

// Error is an API error: HTTP status, envelope type and a message that says
// what was wrong and what to do.
type Error struct {
	Status  int
	Type    string
	Message string
	// Details, when set, is the envelope's error.details (a 412 of the
	// work queue carries the item's current_state there).
	Details any
}

func (e *Error) Error() string { return fmt.Sprintf("%d %s: %s", e.Status, e.Type, e.Message) }

// Errorf builds an *Error.
func Errorf(status int, typ, format string, args ...any) *Error {
	return &Error{Status: status, Type: typ, Message: fmt.Sprintf(format, args...)}
}

// BadRequest is a 400 invalid_request_error.
func BadRequest(format string, args ...any) *Error {
	return Errorf(http.StatusBadRequest, TypeInvalidRequest, format, args...)
}

// NotFound is a 404 naming the kind and id. Another tenant's resource answers
// the same way, so ids leak nothing.
func NotFound(kind, id string) *Error {
	return Errorf(http.StatusNotFound, TypeNotFound, "%s %q not found", kind, id)
}

type envelope struct {
	Type      string      `json:"type"`
	Error     envelopeErr `json:"error"`
	RequestID string      `json:"request_id,omitempty"`
}

type envelopeErr struct {
	Type    string `json:"type"`
	Message string `json:"message"`
	Details any    `json:"details,omitempty"`
}

// writeError writes err in the envelope. Errors that are not *Error are
// mapped from the Managed Agents service's refusals and store sentinels; anything else is a 500 whose details go to
// the log, not the client.
func (s *Server) writeError(w http.ResponseWriter, r *http.Request, err error) {
	err = managedErr(err)
	var e *Error
	if ce, ok := clusterErr(err); ok {
		err = ce
	}
	switch {
	case errors.As(err, &e):
	case errors.Is(err, store.ErrNotFound):
		e = Errorf(http.StatusNotFound, TypeNotFound, "not found")
	case errors.Is(err, store.ErrAlreadyExists):
		e = Errorf(http.StatusConflict, TypeConflict, "%s", err)
	case errors.Is(err, store.ErrVersionMismatch), errors.Is(err, store.ErrConflict):
		e = Errorf(http.StatusConflict, TypeConflict, "%s", err)
	case errors.Is(err, store.ErrInvalid):
		e = BadRequest("%s", err)
	default:
		if perr := s.pingStore(r.Context()); perr != nil {
			// Not a fault of this request: the store cannot be reached
			// (a partition, a restarting database). Nothing was decided
			// that a retry would repeat wrongly.
			s.log.WarnContext(r.Context(), "the store is unreachable", "err", err, "ping", perr, "method", r.Method, "path", r.URL.Path, "request_id", requestID(r.Context()))
			w.Header().Set("Retry-After", "1")
			e = Errorf(http.StatusServiceUnavailable, TypeAPI, "the store is unreachable; retry (request %s)", requestID(r.Context()))
			break
		}
		s.log.ErrorContext(r.Context(), "internal error", "err", err, "method", r.Method, "path", r.URL.Path, "request_id", requestID(r.Context()))
		e = Errorf(http.StatusInternalServerError, TypeAPI, "internal error; see the daemon log for request %s", requestID(r.Context()))
	}
	writeJSON(w, e.Status, envelope{Type: "error", Error: envelopeErr{Type: e.Type, Message: e.Message, Details: e.Details}, RequestID: requestID(r.Context())})
}

// storePing bounds the store ping that tells an unreachable store from an
// internal error.
const storePing = 2 * time.Second

// pingStore pings the store, whatever became of the request's context.
func (s *Server) pingStore(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), storePing)
	defer cancel()
	return s.store.Ping(ctx)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	_ = enc.Encode(v)
}
