package safetar

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"
	"time"
)

// Extract writes every entry of tr into dir, which must exist, as o
// allows. It stops at the first refused entry; what was written before
// stays, so callers extract into a fresh directory and swap it in only on
// success.
func Extract(ctx context.Context, tr *tar.Reader, dir string, o Options) (Stats, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Stats{}, err
	}
	defer root.Close()
	x := &extractor{o: o, root: root}
	if err := x.run(ctx, tr); err != nil {
		return x.st, err
	}
	return x.st, x.finish()
}

// Check reads a whole archive and applies o's rules without writing
// anything (a repeated path and where a symlink leads are only found by
// Extract, which has the tree).
func Check(ctx context.Context, tr *tar.Reader, o Options) (Stats, error) {
	x := &extractor{o: o}
	err := x.run(ctx, tr)
	return x.st, err
}

type extractor struct {
	o       Options
	root    *os.Root // nil: check only
	buf     []byte
	st      Stats
	entries int64
	dirs    []dirMeta
}

type dirMeta struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
}

func (x *extractor) run(ctx context.Context, tr *tar.Reader) error {
	x.buf = make([]byte, 1<<20)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%w: read archive: %w", ErrMalformed, err)
		}
		x.entries++
		if x.o.MaxEntries > 0 && x.entries > x.o.MaxEntries {
			return &LimitError{Entries: true, Max: x.o.MaxEntries, Got: x.entries}
		}
		if err := x.entry(hdr, sourceReader{tr}); err != nil {
			return err
		}
	}
}

func special(t byte) bool { return t == tar.TypeChar || t == tar.TypeBlock || t == tar.TypeFifo }

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil // PAX metadata, not a file
	}
	if special(hdr.Typeflag) && x.o.SkipSpecial {
		x.st.Skipped++
		return nil
	}
	name, err := x.safeName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "." {
		if x.o.SkipRoot {
			return nil
		}
		return &EntryError{hdr.Name, "names the " + x.o.Target + " itself"}
	}
	switch t := hdr.Typeflag; {
	case t == tar.TypeDir:
		err = x.dir(name, hdr)
	case t == tar.TypeReg, t == tar.TypeGNUSparse && x.o.Sparse: // the reader expands sparse files
		err = x.file(name, hdr, r)
	case t == tar.TypeSymlink && x.o.Symlinks != Refuse:
		err = x.symlink(name, hdr)
	case t == tar.TypeLink && x.o.Hardlinks == Inside:
		err = x.hardlink(name, hdr)
	case special(t):
		return &EntryError{hdr.Name, "device nodes and FIFOs are never created"}
	case t == tar.TypeSymlink:
		return &EntryError{hdr.Name, "symlinks are not accepted in a " + x.o.Target}
	case t == tar.TypeLink:
		return &EntryError{hdr.Name, "hard links are not accepted in a " + x.o.Target}
	default:
		return &EntryError{hdr.Name, fmt.Sprintf("entry type %q is not supported", hdr.Typeflag)}
	}
	if err != nil {
		var ee *EntryError
		var le *LimitError
		if errors.As(err, &ee) || errors.As(err, &le) {
			return err
		}
		return fmt.Errorf("extract %s: %w", name, x.escapeErr(hdr.Name, err))
	}
	return nil
}

// safeName cleans an archive path; absolute paths and ".." are refused.
// os.Root would refuse them too; checking first gives a clear error.
func (x *extractor) safeName(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) {
		return "", &EntryError{name, "empty or malformed path"}
	}
	if path.IsAbs(name) {
		return "", &EntryError{name, "absolute path"}
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return "", &EntryError{name, `".." would leave the ` + x.o.Target}
		}
	}
	return path.Clean(name), nil
}

// escapeErr names os.Root's refusal to follow a symlink out of the target
// (its error is unexported in package os, so it is matched by text).
func (x *extractor) escapeErr(entry string, err error) error {
	if isEscape(err) {
		return &EntryError{entry, "it goes through a symlink that leads out of the " + x.o.Target}
	}
	return err
}

func isEscape(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return true
		}
	}
	return false
}

func (x *extractor) mode(hdr *tar.Header) fs.FileMode {
	if x.o.Mode != nil {
		return x.o.Mode(hdr)
	}
	return ModeDropSetID(hdr)
}

func (x *extractor) dir(name string, hdr *tar.Header) error {
	x.st.Dirs++
	if x.root == nil {
		return nil
	}
	if fi, err := x.root.Lstat(name); err == nil && !fi.IsDir() {
		if !x.o.Overwrite {
			return x.repeated(hdr)
		}
		if err := x.root.Remove(name); err != nil {
			return err
		}
	}
	if err := x.root.MkdirAll(name, 0o700); err != nil {
		return err
	}
	x.owner(name, hdr)
	// Modes and times of directories are applied at the end, deepest
	// first, so a read-only directory does not block its own contents.
	x.dirs = append(x.dirs, dirMeta{name: name, mode: x.mode(hdr), mtime: hdr.ModTime})
	return nil
}

func (x *extractor) file(name string, hdr *tar.Header, r io.Reader) error {
	if hdr.Size < 0 {
		return fmt.Errorf("%w: %q has a negative size", ErrMalformed, hdr.Name)
	}
	if x.o.MaxBytes > 0 && x.st.Bytes+hdr.Size > x.o.MaxBytes {
		return &LimitError{Max: x.o.MaxBytes, Got: x.st.Bytes + hdr.Size}
	}
	var n int64
	var err error
	if x.root == nil {
		n, err = io.CopyBuffer(io.Discard, r, x.buf)
	} else {
		n, err = x.writeFile(name, hdr, r)
	}
	if err != nil {
		return err
	}
	if n != hdr.Size {
		return fmt.Errorf("%w: %q: %d of %d bytes", ErrMalformed, hdr.Name, n, hdr.Size)
	}
	x.st.Files++
	x.st.Bytes += n
	return nil
}

func (x *extractor) writeFile(name string, hdr *tar.Header, r io.Reader) (int64, error) {
	if err := x.makeRoom(name, hdr); err != nil {
		return 0, err
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return 0, err
	}
	n, err := io.CopyBuffer(f, r, x.buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return n, err
	}
	if n != hdr.Size {
		return n, nil // reported by the caller
	}
	x.owner(name, hdr)
	if err := x.root.Chmod(name, x.mode(hdr)); err != nil {
		return n, err
	}
	return n, x.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
}

// sourceReader marks the errors of reading the archive, so a truncated or
// corrupt stream (ErrMalformed) is told apart from a failed write.
type sourceReader struct{ r io.Reader }

func (s sourceReader) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	if err != nil && err != io.EOF {
		err = fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return n, err
}

// symlink creates the link as data; os.Root never follows it out when
// later entries are written. With Inside its target must stay inside.
func (x *extractor) symlink(name string, hdr *tar.Header) error {
	if x.o.Symlinks == Inside {
		t := hdr.Linkname
		if t == "" || strings.ContainsRune(t, 0) || path.IsAbs(t) {
			return &EntryError{hdr.Name, fmt.Sprintf("symlink to %q leads out of the %s (only relative targets inside it are accepted)", t, x.o.Target)}
		}
		if j := path.Join(path.Dir(name), t); j == ".." || strings.HasPrefix(j, "../") {
			return &EntryError{hdr.Name, fmt.Sprintf("symlink to %q leads out of the %s", t, x.o.Target)}
		}
	}
	x.st.Symlinks++
	if x.root == nil {
		return nil
	}
	if err := x.makeRoom(name, hdr); err != nil {
		return err
	}
	if err := x.root.Symlink(hdr.Linkname, name); err != nil {
		return err
	}
	if x.o.Chown {
		_ = x.root.Lchown(name, hdr.Uid, hdr.Gid)
	}
	return nil
}

func (x *extractor) hardlink(name string, hdr *tar.Header) error {
	target, err := x.safeName(hdr.Linkname)
	if err != nil {
		return &EntryError{hdr.Name, fmt.Sprintf("hard link to %q leads out of the %s", hdr.Linkname, x.o.Target)}
	}
	x.st.Files++
	if x.root == nil {
		return nil
	}
	fi, err := x.root.Lstat(target)
	if err != nil || fi.IsDir() {
		if err != nil && isEscape(err) {
			return x.escapeErr(hdr.Name, err)
		}
		return &EntryError{hdr.Name, fmt.Sprintf("hard link to %q, which is not an earlier file of the archive", hdr.Linkname)}
	}
	if err := x.makeRoom(name, hdr); err != nil {
		return err
	}
	return x.root.Link(target, name)
}

// makeRoom creates a non-directory entry's parents and, with Overwrite,
// removes what is at its path (a later entry wins, as with tar itself).
func (x *extractor) makeRoom(name string, hdr *tar.Header) error {
	if dir := path.Dir(name); dir != "." {
		if err := x.root.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	if !x.o.Overwrite {
		if _, err := x.root.Lstat(name); err == nil {
			return x.repeated(hdr)
		}
		return nil
	}
	err := x.root.Remove(name)
	if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
		return &EntryError{hdr.Name, "the path is a directory with entries, which a later entry cannot replace"}
	}
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (x *extractor) repeated(hdr *tar.Header) error {
	return &EntryError{hdr.Name, "the path appears twice in the archive"}
}

func (x *extractor) owner(name string, hdr *tar.Header) {
	if x.o.Chown {
		_ = x.root.Lchown(name, hdr.Uid, hdr.Gid)
	}
}

func (x *extractor) finish() error {
	if x.o.Symlinks == Inside {
		if err := x.symlinksStayInside(); err != nil {
			return err
		}
	}
	sort.Slice(x.dirs, func(i, j int) bool { return len(x.dirs[i].name) > len(x.dirs[j].name) })
	for _, d := range x.dirs {
		if fi, err := x.root.Lstat(d.name); err != nil || !fi.IsDir() {
			continue // replaced by a later entry
		}
		if err := x.root.Chmod(d.name, d.mode); err != nil {
			return err
		}
		if err := x.root.Chtimes(d.name, d.mtime, d.mtime); err != nil {
			return err
		}
	}
	return nil
}

// symlinksStayInside follows every symlink of the finished tree (hard links
// to symlinks included) through the os.Root: a chain whose targets each
// look inside but together climb out ("a" → "b/..", "b" → ".") is found
// here, where the lexical check per entry cannot see it.
func (x *extractor) symlinksStayInside() error {
	return fs.WalkDir(x.root.FS(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink == 0 {
			return nil
		}
		if _, err := x.root.Stat(p); err != nil && isEscape(err) {
			target, _ := x.root.Readlink(p)
			return &EntryError{p, fmt.Sprintf("symlink to %q leads out of the %s", target, x.o.Target)}
		}
		return nil
	})
}
