// Package blob defines agentkernel's blob storage: large, immutable-per-write
// byte streams (workspace snapshots, transcripts) addressed by a string key.
// Engines live in sub-packages, one per backend (fsblob for the local disk,
// S3 later); blobtest is the one contract suite every engine runs.
//
// The interface is S3-shaped on purpose: whole-object Put and Get, no append
// or partial write, a flat key space where "/" only matters to List prefixes.
// Nothing in it holds a whole blob in memory.
package blob

import (
	"context"
	"io"
	"iter"
	"time"
)

// Info describes a stored blob.
type Info struct {
	Key  string
	Size int64
	// SHA256 is the lowercase hex sha256 of the blob's bytes, computed while
	// the blob was written and checked again by every full Get.
	SHA256  string
	ModTime time.Time
}

// Store is a blob backend.
type Store interface {
	// Put streams r into key and replaces any blob already there. The new
	// blob becomes visible all at once: readers see the old blob or the new
	// one, never a prefix. With concurrent Puts of one key the last to
	// commit wins.
	Put(ctx context.Context, key string, r io.Reader) (Info, error)

	// Get opens key for reading. The reader verifies the length and sha256
	// recorded by Put: when the stored bytes do not match, the Read that
	// reaches the end returns an error wrapping ErrCorrupt instead of io.EOF.
	// A caller that stops reading before EOF gets no verification. Missing
	// keys give ErrNotFound. The caller must Close the reader.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)

	// Stat returns key's Info without reading the blob (ErrNotFound when
	// missing).
	Stat(ctx context.Context, key string) (Info, error)

	// Delete removes key. Deleting a missing key is not an error, as in S3,
	// so retried and concurrent deletes are harmless.
	Delete(ctx context.Context, key string) error

	// List yields the blobs whose key starts with prefix ("" for all), in
	// byte-wise key order, as S3's ListObjectsV2 does. prefix is a plain
	// string prefix, not a directory: "backups/s1" matches "backups/s1/a" and
	// "backups/s10". An error for one entry is yielded and the listing goes
	// on; the consumer decides whether to stop.
	List(ctx context.Context, prefix string) iter.Seq2[Info, error]
}
