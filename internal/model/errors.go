package model

import (
	"errors"
	"fmt"
)

// APIError is a provider's HTTP error answer. Status lets callers tell an
// overloaded (529/503) or rate-limited (429) model from other failures.
type APIError struct {
	Provider string
	Status   int
	Message  string
	Err      error
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s model request failed (HTTP %d): %s", e.Provider, e.Status, e.Message)
}

func (e *APIError) Unwrap() error { return e.Err }

// ErrorKind classifies err as the Managed Agents API's session.error type:
// model_overloaded_error, model_rate_limited_error or
// model_request_failed_error.
func ErrorKind(err error) string {
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case 429:
			return "model_rate_limited_error"
		case 529, 503:
			return "model_overloaded_error"
		}
	}
	return "model_request_failed_error"
}
