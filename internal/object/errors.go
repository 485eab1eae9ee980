package object

import (
	"errors"
	"fmt"
)

// Sentinel errors of the runtime; the API maps them to statuses.
var (
	// ErrUnknownClass: no class of that name for the tenant (404).
	ErrUnknownClass = errors.New("unknown object class")
	// ErrSandboxUnavailable: the object's sandbox could not be started or
	// reached (503 sandbox_unavailable).
	ErrSandboxUnavailable = errors.New("sandbox_unavailable")
	// ErrCallTimeout: the method ran past call_timeout (504).
	ErrCallTimeout = errors.New("object call timed out")
	// ErrClassConflict: the class is declared in agentkernel.toml and cannot
	// be changed through the API (409).
	ErrClassConflict = errors.New("object class is defined in configuration")
	// ErrStopped: the runtime is shutting down.
	ErrStopped = errors.New("object runtime stopped")
	// ErrNoBundle: the class has no bundle (404).
	ErrNoBundle = errors.New("no bundle")
)

// BundleError is an uploaded bundle the runtime refused (400): not a
// readable archive, an entry that is unsafe or of a kind not accepted, or
// no files at all. Nothing of it was stored.
type BundleError struct {
	Class  string
	Reason string
	Err    error
}

func (e *BundleError) Error() string {
	return fmt.Sprintf("bundle for class %q refused, nothing was stored: %s", e.Class, e.Reason)
}

func (e *BundleError) Unwrap() error { return e.Err }

// FieldError is bad input, naming the field (400).
type FieldError struct {
	Field  string
	Reason string
}

func (e *FieldError) Error() string { return fmt.Sprintf("field %q: %s", e.Field, e.Reason) }

// LimitError says which configured limit a request or an object exceeded.
type LimitError struct {
	// Limit is the configuration key, e.g. "durable_objects.max_keys".
	Limit string
	Max   int64
	Got   int64
	// What says what was over, e.g. "storage keys of counter/a".
	What string
	// TooLarge marks a request body over a limit (413) rather than an
	// object over one (422).
	TooLarge bool
}

func (e *LimitError) Error() string {
	return fmt.Sprintf("%s: %d exceeds the limit of %d (%s)", e.What, e.Got, e.Max, e.Limit)
}

// ObjectError is a non-2xx answer of the object's own server. It goes back
// to the caller with its status and body, and is never retried.
type ObjectError struct {
	Status      int
	Body        []byte
	ContentType string
}

func (e *ObjectError) Error() string {
	b := e.Body
	if len(b) > 200 {
		b = b[:200]
	}
	return fmt.Sprintf("object answered HTTP %d: %s", e.Status, b)
}

func unavailable(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrSandboxUnavailable, fmt.Sprintf(format, args...))
}
