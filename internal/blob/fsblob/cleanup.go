package fsblob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"
)

// Cleanup removes temp files left by writers that crashed (or were killed)
// before renaming them into place, when they are older than olderThan, and
// returns how many it removed. Readers never see temp files, so this only
// reclaims space. olderThan must exceed the longest Put still running
// against the directory: Cleanup(ctx, 0) is only safe when no Put is.
func (s *Store) Cleanup(ctx context.Context, olderThan time.Duration) (int, error) {
	cutoff := s.now().Add(-olderThan)
	removed := 0
	err := fs.WalkDir(s.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil // removed under us
			}
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if d.IsDir() || !strings.HasPrefix(d.Name(), tempPrefix) {
			return nil
		}
		fi, err := d.Info()
		if err != nil || fi.ModTime().After(cutoff) {
			return nil
		}
		if err := s.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		removed++
		return nil
	})
	if err != nil {
		return removed, fmt.Errorf("fsblob: cleanup temp files: %w", err)
	}
	return removed, nil
}
