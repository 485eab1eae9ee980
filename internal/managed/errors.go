package managed

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// InputError is a request the service refuses for what it says: Status is
// the HTTP status the API answers with (400, 404, 409, 413), Field the
// field the message names ("" when it names none) and Msg the whole
// message the client sees.
type InputError struct {
	Status int
	Field  string
	Msg    string
}

func (e *InputError) Error() string { return e.Msg }

// inputErr builds an InputError; Field is the field the message opens
// with ("field \"x\" …"), which is how every field message here starts.
func inputErr(status int, format string, args ...any) *InputError {
	msg := fmt.Sprintf(format, args...)
	e := &InputError{Status: status, Msg: msg}
	if rest, ok := strings.CutPrefix(msg, "field "); ok {
		if q, err := strconv.QuotedPrefix(rest); err == nil {
			e.Field, _ = strconv.Unquote(q)
		}
	}
	return e
}

func badRequest(format string, args ...any) error {
	return inputErr(http.StatusBadRequest, format, args...)
}

func conflict(format string, args ...any) error {
	return inputErr(http.StatusConflict, format, args...)
}

// notFound names the kind and id. Another tenant's resource answers the
// same way, so ids leak nothing.
func notFound(kind, id string) error {
	return inputErr(http.StatusNotFound, "%s %q not found", kind, id)
}

// syntaxError is the refusal of a body that is not JSON.
func syntaxError(err error) error {
	var syn *json.SyntaxError
	if errors.As(err, &syn) {
		return badRequest("malformed JSON at byte %d: %v", syn.Offset, syn)
	}
	return badRequest("malformed JSON: %v", err)
}
