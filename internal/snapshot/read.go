package snapshot

import (
	"archive/tar"
	"bytes"
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

// Verify reads a whole archive (every part) without writing anything and
// returns its Stats; it fails on a truncated or corrupt stream or an unsafe
// entry.
func Verify(ctx context.Context, r io.Reader) (Stats, error) {
	return walkArchive(ctx, r, nil)
}

// Extract restores an archive into dirs, which must exist: its first part
// (the workspace) into dirs[0], its second (WriteOptions.Runtime) into
// dirs[1]; a part without a directory is read and checked, not restored.
// Every path is resolved through an os.Root on its directory (safetar):
// nothing is read or written outside it.
func Extract(ctx context.Context, r io.Reader, dirs ...string) (Stats, error) {
	return walkArchive(ctx, r, dirs)
}

// Replace restores an archive in place of the contents of dirs (see
// Extract): it extracts each part into a sibling directory and swaps them
// in only when the whole archive was extracted, so a bad archive never
// leaves a half-restored workspace. A part the archive lacks (a backup
// taken before the runtime directory existed) leaves its directory empty.
func Replace(ctx context.Context, r io.Reader, dirs ...string) (Stats, error) {
	tmps := make([]string, 0, len(dirs))
	cleanup := func() {
		for _, t := range tmps {
			os.RemoveAll(t)
		}
	}
	for _, dir := range dirs {
		tmp, err := os.MkdirTemp(filepath.Dir(dir), "."+filepath.Base(dir)+".restore-")
		if err != nil {
			cleanup()
			return Stats{}, err
		}
		tmps = append(tmps, tmp)
	}
	st, err := Extract(ctx, r, tmps...)
	if err != nil {
		cleanup()
		return st, err
	}
	for i, dir := range dirs {
		if err := swapIn(tmps[i], dir); err != nil {
			cleanup()
			return st, err
		}
	}
	return st, nil
}

// swapIn puts tmp in place of dir (keeping dir's mode) and removes the old
// contents.
func swapIn(tmp, dir string) error {
	if fi, err := os.Stat(dir); err == nil {
		_ = os.Chmod(tmp, fi.Mode().Perm())
	}
	old := tmp + ".old"
	if err := os.Rename(dir, old); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.Rename(tmp, dir); err != nil {
		_ = os.Rename(old, dir)
		return err
	}
	return os.RemoveAll(old)
}

// maxParts bounds the tar archives one snapshot stream may hold.
const maxParts = 2

// walkArchive reads every part of the stream (one tar archive after the
// other in one zstd stream) and restores each part that has a directory in
// dirs; the others are only checked.
func walkArchive(ctx context.Context, r io.Reader, dirs []string) (Stats, error) {
	var out Stats
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return out, err
	}
	defer zr.Close()
	var in io.Reader = zr
	for part := 0; ; part++ {
		if part > 0 {
			// Is there another part? Read one byte and put it back.
			var b [1]byte
			n, err := io.ReadFull(zr, b[:])
			if n == 0 && errors.Is(err, io.EOF) {
				return out, nil
			}
			if err != nil {
				return out, fmt.Errorf("snapshot: read archive: %w", err)
			}
			in = io.MultiReader(bytes.NewReader(b[:]), zr)
		}
		if part == maxParts {
			return out, fmt.Errorf("snapshot: read archive: more than %d parts", maxParts)
		}
		tr := tar.NewReader(in)
		var st safetar.Stats
		if part < len(dirs) && dirs[part] != "" {
			st, err = safetar.Extract(ctx, tr, dirs[part], safetar.Workspace())
		} else {
			st, err = safetar.Check(ctx, tr, safetar.Workspace())
		}
		out.Files += int(st.Files)
		out.Dirs += int(st.Dirs)
		out.Symlinks += int(st.Symlinks)
		out.Bytes += st.Bytes
		out.Skipped += int(st.Skipped)
		if err != nil {
			return out, fmt.Errorf("snapshot: %w", err)
		}
	}
}
