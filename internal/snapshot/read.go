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
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/zstd"
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
// Every path is resolved through an os.Root on its directory: nothing is
// read or written outside it.
func Extract(ctx context.Context, r io.Reader, dirs ...string) (Stats, error) {
	xs := make([]*extractor, len(dirs))
	for i, dir := range dirs {
		root, err := os.OpenRoot(dir)
		if err != nil {
			return Stats{}, err
		}
		defer root.Close()
		xs[i] = &extractor{root: root, chown: os.Geteuid() == 0}
	}
	st, err := walkArchive(ctx, r, xs)
	if err != nil {
		return st, err
	}
	for _, x := range xs {
		if err := x.finish(); err != nil {
			return st, err
		}
	}
	return st, nil
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
// other in one zstd stream) and, where xs has an extractor for a part,
// restores it.
func walkArchive(ctx context.Context, r io.Reader, xs []*extractor) (Stats, error) {
	var st Stats
	zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return st, err
	}
	defer zr.Close()
	buf := make([]byte, 1<<20)
	var in io.Reader = zr
	for part := 0; ; part++ {
		if part > 0 {
			// Is there another part? Read one byte and put it back.
			var b [1]byte
			n, err := io.ReadFull(zr, b[:])
			if n == 0 && errors.Is(err, io.EOF) {
				return st, nil
			}
			if err != nil {
				return st, fmt.Errorf("snapshot: read archive: %w", err)
			}
			in = io.MultiReader(bytes.NewReader(b[:]), zr)
		}
		if part == maxParts {
			return st, fmt.Errorf("snapshot: read archive: more than %d parts", maxParts)
		}
		var x *extractor
		if part < len(xs) {
			x = xs[part]
		}
		if err := walkPart(ctx, tar.NewReader(in), x, buf, &st); err != nil {
			return st, err
		}
	}
}

func walkPart(ctx context.Context, tr *tar.Reader, x *extractor, buf []byte, st *Stats) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("snapshot: read archive: %w", err)
		}
		name, err := safeName(hdr.Name)
		if err != nil {
			return err
		}
		switch hdr.Typeflag {
		case tar.TypeDir:
			st.Dirs++
			if x != nil {
				err = x.dir(name, hdr)
			}
		case tar.TypeReg:
			var n int64
			if x != nil {
				n, err = x.file(name, hdr, tr, buf)
			} else {
				n, err = io.CopyBuffer(io.Discard, tr, buf)
			}
			if err == nil && n != hdr.Size {
				err = fmt.Errorf("snapshot: %s: %d of %d bytes", name, n, hdr.Size)
			}
			st.Files++
			st.Bytes += n
		case tar.TypeSymlink:
			st.Symlinks++
			if x != nil {
				err = x.symlink(name, hdr)
			}
		default:
			return &unsafeEntryError{Name: hdr.Name, Reason: fmt.Sprintf("entry type %q is never restored", hdr.Typeflag)}
		}
		if err != nil {
			return fmt.Errorf("snapshot: restore %s: %w", name, err)
		}
	}
}

// safeName cleans an archive path and refuses anything that is absolute or
// climbs out of the root. os.Root would refuse these too; checking first
// gives a clear error.
func safeName(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) || strings.Contains(name, `\`) {
		return "", &unsafeEntryError{Name: name, Reason: "empty or malformed path"}
	}
	if path.IsAbs(name) {
		return "", &unsafeEntryError{Name: name, Reason: "absolute path"}
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return "", &unsafeEntryError{Name: name, Reason: `".." escapes the workspace`}
		}
	}
	clean := path.Clean(name)
	if clean == "." {
		return "", &unsafeEntryError{Name: name, Reason: "names the root itself"}
	}
	return clean, nil
}

type extractor struct {
	root  *os.Root
	chown bool
	dirs  []dirMeta
}

type dirMeta struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
}

func (x *extractor) dir(name string, hdr *tar.Header) error {
	if err := x.root.MkdirAll(name, 0o700); err != nil {
		return err
	}
	x.owner(name, hdr)
	// Modes and times of directories are applied at the end, deepest
	// first, so a read-only directory does not block its own contents.
	x.dirs = append(x.dirs, dirMeta{name: name, mode: fs.FileMode(hdr.Mode).Perm() | modeBits(hdr.Mode), mtime: hdr.ModTime})
	return nil
}

func (x *extractor) file(name string, hdr *tar.Header, r io.Reader, buf []byte) (int64, error) {
	if err := x.parent(name); err != nil {
		return 0, err
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.CopyBuffer(f, r, buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	x.owner(name, hdr)
	if err := x.root.Chmod(name, fs.FileMode(hdr.Mode).Perm()|modeBits(hdr.Mode)); err != nil {
		return n, err
	}
	return n, x.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
}

func (x *extractor) symlink(name string, hdr *tar.Header) error {
	if err := x.parent(name); err != nil {
		return err
	}
	// The link is restored as data; os.Root never follows it outside the
	// root when later entries are written through it.
	if err := x.root.Symlink(hdr.Linkname, name); err != nil {
		return err
	}
	if x.chown {
		_ = x.root.Lchown(name, hdr.Uid, hdr.Gid)
	}
	return nil
}

func (x *extractor) parent(name string) error {
	if dir := path.Dir(name); dir != "." {
		return x.root.MkdirAll(dir, 0o700)
	}
	return nil
}

func (x *extractor) owner(name string, hdr *tar.Header) {
	if x.chown {
		_ = x.root.Lchown(name, hdr.Uid, hdr.Gid)
	}
}

func (x *extractor) finish() error {
	sort.Slice(x.dirs, func(i, j int) bool { return len(x.dirs[i].name) > len(x.dirs[j].name) })
	for _, d := range x.dirs {
		if err := x.root.Chmod(d.name, d.mode); err != nil {
			return err
		}
		if err := x.root.Chtimes(d.name, d.mtime, d.mtime); err != nil {
			return err
		}
	}
	return nil
}

// modeBits maps setuid/setgid/sticky from tar's mode to fs.FileMode.
func modeBits(m int64) fs.FileMode {
	var out fs.FileMode
	if m&0o4000 != 0 {
		out |= fs.ModeSetuid
	}
	if m&0o2000 != 0 {
		out |= fs.ModeSetgid
	}
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}
