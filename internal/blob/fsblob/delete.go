package fsblob

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// Delete removes key; a missing key is not an error. Empty directories are
// left in place: removing them would race with a concurrent Put that has
// just created the directory for its temp file.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := blob.ValidateKey(key); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	name := fileName(key)
	err := s.root.Remove(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("fsblob: delete %q: %w", key, err)
	}
	if err := s.syncDir(path.Dir(name)); err != nil {
		return fmt.Errorf("fsblob: delete %q: fsync directory: %w", key, err)
	}
	return nil
}
