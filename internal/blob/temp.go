package blob

import (
	"context"
	"time"
)

// TempRemover is the optional capability of engines that keep temp files
// of writes in flight on their own storage (fsblob): a writer that dies
// mid-Put leaves one behind, and only the engine can find it.
type TempRemover interface {
	// RemoveTemp removes temp files last written before cutoff, except
	// those of this process's Puts still running.
	RemoveTemp(ctx context.Context, cutoff time.Time) (TempReport, error)
}

// TempReport says what RemoveTemp removed.
type TempReport struct {
	Files int
	Bytes int64
}
