package snapshot

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zstd"
)

// WriteOptions tune Write.
type WriteOptions struct {
	// Exclude, when set, leaves out entries whose slash-separated path
	// relative to the root it returns true for (a directory excludes its
	// subtree).
	Exclude func(rel string) bool
	// Level is the zstd level; default SpeedFastest (like `zstd -1`).
	Level zstd.EncoderLevel
}

// Write archives dir (its contents, not dir itself) as tar + zstd to w.
func Write(ctx context.Context, dir string, w io.Writer, opts WriteOptions) (Stats, error) {
	var st Stats
	if opts.Level == 0 {
		opts.Level = zstd.SpeedFastest
	}
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(opts.Level), zstd.WithEncoderConcurrency(2))
	if err != nil {
		return st, err
	}
	tw := tar.NewWriter(zw)
	buf := make([]byte, 1<<20)

	walkErr := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		if rel == "." {
			return nil
		}
		rel = filepath.ToSlash(rel)
		if opts.Exclude != nil && opts.Exclude(rel) {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var link string
		switch {
		case fi.Mode().IsRegular(), fi.IsDir():
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(path); err != nil {
				return err
			}
		default:
			st.Skipped++
			return nil
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = rel
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uname, hdr.Gname = "", ""
		hdr.Format = tar.FormatPAX
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		switch {
		case fi.IsDir():
			st.Dirs++
		case link != "":
			st.Symlinks++
		default:
			f, err := os.Open(path)
			if err != nil {
				return err
			}
			n, err := io.CopyBuffer(tw, io.LimitReader(f, hdr.Size), buf)
			f.Close()
			if err != nil {
				return err
			}
			if n != hdr.Size {
				return fmt.Errorf("snapshot: %s changed size while archiving (%d of %d bytes)", rel, n, hdr.Size)
			}
			st.Files++
			st.Bytes += n
		}
		return nil
	})
	if walkErr != nil {
		zw.Close()
		return st, fmt.Errorf("snapshot %s: %w", dir, walkErr)
	}
	if err := tw.Close(); err != nil {
		zw.Close()
		return st, err
	}
	if err := zw.Close(); err != nil {
		return st, err
	}
	return st, nil
}
