package fsblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// Get opens key; the reader verifies size and sha256 at EOF.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, blob.Info, error) {
	f, info, err := s.open(ctx, key)
	if err != nil {
		return nil, blob.Info{}, err
	}
	data := io.NewSectionReader(f, 0, info.Size)
	rc := blob.NewVerifyingReader(ctx, readCloser{Reader: data, Closer: f}, info)
	return rc, info, nil
}

// Stat reads key's footer.
func (s *Store) Stat(ctx context.Context, key string) (blob.Info, error) {
	f, info, err := s.open(ctx, key)
	if err != nil {
		return blob.Info{}, err
	}
	f.Close()
	return info, nil
}

// open validates key, opens its file and reads the footer. Size problems
// (truncation, a missing footer) are reported here as *blob.CorruptError;
// content problems only show at the reader's EOF.
func (s *Store) open(ctx context.Context, key string) (*os.File, blob.Info, error) {
	if err := blob.ValidateKey(key); err != nil {
		return nil, blob.Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return nil, blob.Info{}, err
	}
	f, err := s.root.Open(fileName(key))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, blob.Info{}, blob.NotFoundError(key)
	}
	if err != nil {
		return nil, blob.Info{}, fmt.Errorf("fsblob: open %q: %w", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, blob.Info{}, fmt.Errorf("fsblob: stat %q: %w", key, err)
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, blob.Info{}, fmt.Errorf("fsblob: %q is not a regular file (%s)", key, fi.Mode().Type())
	}
	size, sum, err := readFooter(f, key, fi.Size())
	if err != nil {
		f.Close()
		return nil, blob.Info{}, err
	}
	return f, blob.Info{Key: key, Size: size, SHA256: sum, ModTime: fi.ModTime()}, nil
}

type readCloser struct {
	io.Reader
	io.Closer
}
