package snapshot

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"

	"github.com/agentkernel/agentkernel/internal/safetar"
)

// Verify reads a whole archive without writing anything and returns its
// Stats; it fails on a truncated or corrupt stream or an unsafe entry.
func Verify(ctx context.Context, r io.Reader) (Stats, error) {
	return walkArchive(ctx, r, "")
}

// Extract restores an archive into dir, which must exist. Every path is
// resolved through an os.Root on dir: nothing is read or written outside it.
func Extract(ctx context.Context, r io.Reader, dir string) (Stats, error) {
	return walkArchive(ctx, r, dir)
}

// Replace restores an archive in place of dir's contents: it extracts into a
// sibling directory and swaps it in only when extraction succeeded, so a bad
// archive never leaves a half-restored workspace.
func Replace(ctx context.Context, r io.Reader, dir string) (Stats, error) {
	parent, base := filepath.Dir(dir), filepath.Base(dir)
	tmp, err := os.MkdirTemp(parent, "."+base+".restore-")
	if err != nil {
		return Stats{}, err
	}
	st, err := Extract(ctx, r, tmp)
	if err != nil {
		os.RemoveAll(tmp)
		return st, err
	}
	if fi, err := os.Stat(dir); err == nil {
		_ = os.Chmod(tmp, fi.Mode().Perm())
	}
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		os.RemoveAll(tmp)
		return st, err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.Rename(old, dir)
		os.RemoveAll(tmp)
		return st, err
	}
	return st, os.RemoveAll(old)
}

func walkArchive(ctx context.Context, r io.Reader, dir string) (Stats, error) {
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return Stats{}, err
	}
	defer zr.Close()
	tr := tar.NewReader(zr)
	var st safetar.Stats
	if dir == "" {
		st, err = safetar.Check(ctx, tr, safetar.Workspace())
	} else {
		st, err = safetar.Extract(ctx, tr, dir, safetar.Workspace())
	}
	out := Stats{Files: int(st.Files), Dirs: int(st.Dirs), Symlinks: int(st.Symlinks), Bytes: st.Bytes, Skipped: int(st.Skipped)}
	if err != nil {
		return out, fmt.Errorf("snapshot: %w", err)
	}
	return out, nil
}
