package fsblob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// Cleanup removes temp files left by writers that crashed (or were killed)
// before renaming them into place, when they are older than olderThan, and
// returns how many it removed. See RemoveTemp.
func (s *Store) Cleanup(ctx context.Context, olderThan time.Duration) (int, error) {
	r, err := s.RemoveTemp(ctx, s.now().Add(-olderThan))
	return r.Files, err
}

// RemoveTemp implements blob.TempRemover: it removes the temp files last written before cutoff. Readers
// never see temp files, so this only reclaims space. A Put of this process
// that is still running keeps its temp file whatever its age; a Put of
// another process sharing the directory is protected only by cutoff, which
// must therefore lie before the start of the longest such Put.
func (s *Store) RemoveTemp(ctx context.Context, cutoff time.Time) (blob.TempReport, error) {
	var rep blob.TempReport
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
		if _, live := s.writing.Load(p); live {
			return nil
		}
		fi, err := d.Info()
		if err != nil || !fi.ModTime().Before(cutoff) {
			return nil
		}
		if err := s.root.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		rep.Files++
		rep.Bytes += fi.Size()
		return nil
	})
	if err != nil {
		return rep, fmt.Errorf("fsblob: remove temp files: %w", err)
	}
	return rep, nil
}
