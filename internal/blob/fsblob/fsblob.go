// Package fsblob stores blobs as files under one directory on the local disk.
//
// Layout: blob "a/b/c" is the file "a/b/c.blob" under the root. Each file is
// the blob's bytes followed by a fixed 48-byte footer holding the size and
// sha256 recorded while it was written (see footer.go). Keeping the checksum
// in the same file, rather than in a sidecar, means one rename publishes data
// and checksum together: there is no moment, and no crash, in which they
// disagree.
//
// Writes are atomic: a temp file (".tmp-…", a name no key can produce) in the
// blob's directory is written, fsynced, renamed over the final name, and the
// directory is fsynced. A crashed writer leaves at most a temp file, which
// readers never see and Cleanup removes.
//
// Every file access goes through an os.Root, so neither a key (keys are
// validated anyway) nor a symlink planted inside the root can reach a file
// outside it.
package fsblob

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// DefaultSweepOlderThan is how old a temp file must be before Open removes
// it. It is long enough that no live Put (even of a large blob on a slow
// disk) shares the directory with a sweep that deletes its temp file.
const DefaultSweepOlderThan = time.Hour

// Options configure Open. The zero value is usable.
type Options struct {
	Logger *slog.Logger
	// SweepOlderThan: at Open, temp files left by crashed writers that are
	// older than this are removed. 0 means DefaultSweepOlderThan; negative
	// disables the sweep.
	SweepOlderThan time.Duration
	// Now is the clock used to age temp files (default time.Now).
	Now func() time.Time
}

// Store is a filesystem blob.Store. It is safe for concurrent use, also by
// several processes sharing the directory.
type Store struct {
	root *os.Root
	log  *slog.Logger
	now  func() time.Time
	// writing holds the temp files of this process's Puts in flight, which
	// RemoveTemp never touches whatever their age.
	writing sync.Map
}

var (
	_ blob.Store       = (*Store)(nil)
	_ blob.TempRemover = (*Store)(nil)
)

// Open opens (creating if needed) the blob directory dir and sweeps old temp
// files.
func Open(ctx context.Context, dir string, opts Options) (*Store, error) {
	if dir == "" {
		return nil, fmt.Errorf("fsblob: open: empty directory")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("fsblob: create blob directory %s: %w", dir, err)
	}
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, fmt.Errorf("fsblob: open blob directory %s: %w", dir, err)
	}
	s := &Store{root: root, log: opts.Logger, now: opts.Now}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.now == nil {
		s.now = time.Now
	}
	age := opts.SweepOlderThan
	if age == 0 {
		age = DefaultSweepOlderThan
	}
	if age > 0 {
		n, err := s.Cleanup(ctx, age)
		if err != nil {
			root.Close()
			return nil, err
		}
		if n > 0 {
			s.log.Info("fsblob: removed temp files of interrupted writes", "dir", dir, "count", n)
		}
	}
	return s, nil
}

// Close releases the root directory handle. Readers already returned by Get
// stay usable.
func (s *Store) Close() error { return s.root.Close() }

// fileName maps a validated key to its file under the root.
func fileName(key string) string { return key + blob.ReservedSuffix }
