package objectserver

import (
	"errors"
	"fmt"
	"net/http"
)

// Error is a method failure with the HTTP status the caller should see. A
// handler returns it (as Error or *Error, possibly wrapped) to choose the
// status; any other error becomes a 500. The daemon passes the status and
// the message through to the caller unchanged.
type Error struct {
	Status  int
	Message string
}

func (e Error) Error() string { return e.Message }

// Errorf returns an *Error with status and a formatted message.
func Errorf(status int, format string, args ...any) *Error {
	return &Error{Status: status, Message: fmt.Sprintf(format, args...)}
}

// statusOf finds the status an error asks for: the first Error in its chain
// with a 4xx/5xx status, else 500.
func statusOf(err error) int {
	var v Error
	if errors.As(err, &v) && validStatus(v.Status) {
		return v.Status
	}
	var p *Error
	if errors.As(err, &p) && p != nil && validStatus(p.Status) {
		return p.Status
	}
	return http.StatusInternalServerError
}

// validStatus keeps a chosen status in the error range: a 2xx would make
// the daemon treat the error body as a result.
func validStatus(s int) bool { return s >= 400 && s <= 599 }
