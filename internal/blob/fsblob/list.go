package fsblob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"iter"
	"slices"
	"strings"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// List walks only the directories that can hold keys with prefix, in key
// order; see blob.Store.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[blob.Info, error] {
	return func(yield func(blob.Info, error) bool) {
		if err := blob.ValidatePrefix(prefix); err != nil {
			yield(blob.Info{}, err)
			return
		}
		dir := "."
		if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
			dir = prefix[:i]
		}
		s.walk(ctx, dir, prefix, yield)
	}
}

// entry is a directory entry named as it appears in keys: a blob "x" or a
// directory "x/". Sorting these names sorts keys byte-wise, because every key
// below directory "x/" starts with "x/" and no other entry's keys do.
type entry struct {
	keyName string
	isDir   bool
}

// walk yields the blobs below dir whose keys start with prefix. It returns
// false when the consumer stopped.
func (s *Store) walk(ctx context.Context, dir, prefix string, yield func(blob.Info, error) bool) bool {
	if err := ctx.Err(); err != nil {
		return yield(blob.Info{}, err)
	}
	entries, err := s.readDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return true
	}
	if err != nil {
		return yield(blob.Info{}, fmt.Errorf("fsblob: list %q: %w", dir, err))
	}
	keyDir := ""
	if dir != "." {
		keyDir = dir + "/"
	}
	for _, e := range entries {
		key := keyDir + e.keyName
		if e.isDir {
			// Descend when keys below may match: the directory is inside
			// the prefix, or the prefix continues inside the directory.
			if strings.HasPrefix(key, prefix) || strings.HasPrefix(prefix, key) {
				if !s.walk(ctx, strings.TrimSuffix(key, "/"), prefix, yield) {
					return false
				}
			}
			continue
		}
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		info, err := s.Stat(ctx, key)
		if errors.Is(err, blob.ErrNotFound) {
			continue // deleted since readDir
		}
		if !yield(info, err) {
			return false
		}
	}
	return true
}

// readDir returns dir's blobs and subdirectories in key order. Temp files,
// symlinks and anything else no Put creates are skipped.
func (s *Store) readDir(dir string) ([]entry, error) {
	d, err := s.root.Open(dir)
	if err != nil {
		return nil, err
	}
	defer d.Close()
	des, err := d.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	out := make([]entry, 0, len(des))
	for _, de := range des {
		name := de.Name()
		switch {
		case strings.HasPrefix(name, "."):
		case de.IsDir():
			out = append(out, entry{keyName: name + "/", isDir: true})
		case de.Type().IsRegular() && strings.HasSuffix(name, blob.ReservedSuffix):
			out = append(out, entry{keyName: strings.TrimSuffix(name, blob.ReservedSuffix)})
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.keyName, b.keyName) })
	return out, nil
}
