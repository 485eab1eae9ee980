// Package snapshot turns a sandbox's /workspace into a tar + zstd stream and
// back. Both directions stream (nothing is held whole in memory). Extraction
// is safe against hostile archives: every path is resolved inside an
// os.Root, so absolute paths, ".." and symlinks cannot reach outside the
// target, and device files, FIFOs and sockets are refused.
package snapshot

import "github.com/agentkernel/agentkernel/internal/safetar"

// Stats counts what a snapshot holds. Two snapshots of the same tree have the
// same Stats, which is how a written snapshot is verified by reading it back.
type Stats struct {
	Files    int   `json:"files"`
	Dirs     int   `json:"dirs"`
	Symlinks int   `json:"symlinks"`
	Bytes    int64 `json:"bytes"` // regular file content, uncompressed
	// Skipped counts entries that cannot be archived (sockets, FIFOs,
	// devices); they are left out, never followed.
	Skipped int `json:"skipped"`
}

// ErrUnsafeEntry is returned when an archive entry would escape the target
// or is of a kind that is never restored (devices, FIFOs).
var ErrUnsafeEntry = safetar.ErrUnsafeEntry
