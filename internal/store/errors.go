package store

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every engine maps its native errors to these at its
// boundary and wraps them with %w, so callers use errors.Is and never look at
// driver error codes.
var (
	// ErrNotFound: the row named by the call does not exist.
	ErrNotFound = errors.New("not found")
	// ErrAlreadyExists: a create lost the race to another creator of the same id.
	ErrAlreadyExists = errors.New("already exists")
	// ErrConflict: a uniqueness or state constraint other than identity failed.
	ErrConflict = errors.New("conflict")
	// ErrVersionMismatch: an expectedVersion did not match the stored version.
	// The write did not happen.
	ErrVersionMismatch = errors.New("version mismatch")
	// ErrInvalid: the parameters are malformed (empty id, bad JSON, …).
	ErrInvalid = errors.New("invalid parameters")
)

// StaleStateError is returned by SaveState and SaveStateAndPromoteStaging when
// ExpectedVersion does not match. It unwraps to ErrVersionMismatch. Nothing
// was written.
type StaleStateError struct {
	SessionID       string
	ExpectedVersion int64
	CurrentVersion  int64
}

func (e *StaleStateError) Error() string {
	return fmt.Sprintf("session %s: stale state: expected version %d, current version %d",
		e.SessionID, e.ExpectedVersion, e.CurrentVersion)
}

func (e *StaleStateError) Unwrap() error { return ErrVersionMismatch }
