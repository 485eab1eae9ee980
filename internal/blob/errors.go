package blob

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every engine wraps them with %w so callers use errors.Is.
var (
	// ErrNotFound: no blob is stored under the key.
	ErrNotFound = errors.New("blob not found")
	// ErrCorrupt: the stored bytes do not match the length or sha256
	// recorded when the blob was written.
	ErrCorrupt = errors.New("blob corrupt")
	// ErrInvalidKey: the key breaks the rules in ValidateKey.
	ErrInvalidKey = errors.New("invalid blob key")
)

// KeyError says which key was refused and why. It unwraps to ErrInvalidKey.
type KeyError struct {
	Key    string
	Reason string
}

func (e *KeyError) Error() string {
	return fmt.Sprintf("invalid blob key %q: %s", e.Key, e.Reason)
}

func (e *KeyError) Unwrap() error { return ErrInvalidKey }

// CorruptError carries the evidence of a failed verification. It unwraps to
// ErrCorrupt. Want* are what Put recorded; Got* what was read back (GotSHA256
// is empty when the length check already failed).
type CorruptError struct {
	Key        string
	Reason     string
	WantSize   int64
	GotSize    int64
	WantSHA256 string
	GotSHA256  string
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("blob %q corrupt: %s (want %d bytes sha256 %s, got %d bytes sha256 %s)",
		e.Key, e.Reason, e.WantSize, e.WantSHA256, e.GotSize, e.GotSHA256)
}

func (e *CorruptError) Unwrap() error { return ErrCorrupt }

// NotFoundError returns an error naming key that wraps ErrNotFound.
func NotFoundError(key string) error {
	return fmt.Errorf("blob %q: %w", key, ErrNotFound)
}
