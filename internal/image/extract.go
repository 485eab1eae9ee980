package image

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

var errNotEmpty = syscall.ENOTEMPTY

// tarReader returns a tar reader over r, decompressed as its magic says.
func tarReader(r io.Reader) (*tar.Reader, func(), error) {
	dr, closeFn, err := decompress(r)
	if err != nil {
		return nil, nil, err
	}
	return tar.NewReader(dr), closeFn, nil
}

// extract writes every entry of tr into dir through an os.Root, so no
// entry — nor a symlink an earlier entry planted — can put anything
// outside dir.
func extract(ctx context.Context, tr *tar.Reader, dir string) (Info, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return Info{}, err
	}
	defer root.Close()
	x := &extractor{root: root, chown: os.Geteuid() == 0, buf: make([]byte, 1<<20)}
	for {
		if err := ctx.Err(); err != nil {
			return x.info, err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return x.info, fmt.Errorf("read tarball: %w", err)
		}
		if err := x.entry(hdr, tr); err != nil {
			return x.info, err
		}
	}
	if x.info.Files+x.info.Dirs+x.info.Symlinks == 0 {
		return x.info, errors.New("the tarball has no files")
	}
	return x.info, x.finish()
}

type extractor struct {
	root  *os.Root
	chown bool
	buf   []byte
	info  Info
	dirs  []dirMeta
}

type dirMeta struct {
	name  string
	mode  fs.FileMode
	mtime time.Time
}

func (x *extractor) entry(hdr *tar.Header, r io.Reader) error {
	switch hdr.Typeflag {
	case tar.TypeXGlobalHeader:
		return nil // PAX metadata, not a file
	case tar.TypeChar, tar.TypeBlock, tar.TypeFifo:
		// A sandbox gets its own /dev; device nodes from a tarball are
		// never created.
		x.info.Skipped++
		return nil
	}
	name, err := safeName(hdr.Name)
	if err != nil {
		return err
	}
	if name == "." {
		return nil // the root itself: Import sets its mode
	}
	switch hdr.Typeflag {
	case tar.TypeDir:
		err = x.dir(name, hdr)
	case tar.TypeReg, tar.TypeGNUSparse: // the reader expands sparse files
		err = x.file(name, hdr, r)
	case tar.TypeSymlink:
		err = x.symlink(name, hdr)
	case tar.TypeLink:
		err = x.hardlink(name, hdr)
	default:
		return fmt.Errorf("%w %q: entry type %q is not supported", ErrUnsafeEntry, hdr.Name, hdr.Typeflag)
	}
	if err != nil {
		return fmt.Errorf("extract %s: %w", name, escapeErr(hdr.Name, err))
	}
	return nil
}

// safeName cleans a tar path; absolute paths and ".." are refused rather
// than rewritten, since such a tarball was not made for this.
func safeName(name string) (string, error) {
	if name == "" || strings.ContainsRune(name, 0) {
		return "", fmt.Errorf("%w %q: empty or malformed path", ErrUnsafeEntry, name)
	}
	if path.IsAbs(name) {
		return "", fmt.Errorf("%w %q: absolute path", ErrUnsafeEntry, name)
	}
	for _, seg := range strings.Split(name, "/") {
		if seg == ".." {
			return "", fmt.Errorf("%w %q: \"..\" would leave the image", ErrUnsafeEntry, name)
		}
	}
	return path.Clean(name), nil
}

// escapeErr names os.Root's refusal to follow a symlink out of the image
// (its error is unexported in package os, so it is matched by text).
func escapeErr(entry string, err error) error {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if e.Error() == "path escapes from parent" {
			return fmt.Errorf("%w %q: it goes through a symlink that leads out of the image", ErrUnsafeEntry, entry)
		}
	}
	return err
}

// mode keeps permission bits and sticky but drops setuid/setgid: the
// sandbox runs with no_new_privs, so they are useless inside, and on the
// host they would hand any local user who reaches the images dir a setuid
// binary from an untrusted tarball.
func mode(m int64) fs.FileMode {
	out := fs.FileMode(m).Perm()
	if m&0o1000 != 0 {
		out |= fs.ModeSticky
	}
	return out
}

func (x *extractor) dir(name string, hdr *tar.Header) error {
	fi, err := x.root.Lstat(name)
	if err == nil && !fi.IsDir() {
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
	x.dirs = append(x.dirs, dirMeta{name: name, mode: mode(hdr.Mode), mtime: hdr.ModTime})
	x.info.Dirs++
	return nil
}

func (x *extractor) file(name string, hdr *tar.Header, r io.Reader) error {
	if err := x.replace(name); err != nil {
		return err
	}
	f, err := x.root.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	n, err := io.CopyBuffer(f, r, x.buf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil && n != hdr.Size {
		err = fmt.Errorf("%d of %d bytes", n, hdr.Size)
	}
	if err != nil {
		return err
	}
	x.owner(name, hdr)
	if err := x.root.Chmod(name, mode(hdr.Mode)); err != nil {
		return err
	}
	x.info.Files++
	x.info.Bytes += n
	return x.root.Chtimes(name, hdr.ModTime, hdr.ModTime)
}

// symlink creates the link as data: absolute targets are normal in a
// rootfs (/etc/alternatives) and resolve inside the sandbox; os.Root
// never follows them out when later entries are written.
func (x *extractor) symlink(name string, hdr *tar.Header) error {
	if err := x.replace(name); err != nil {
		return err
	}
	if err := x.root.Symlink(hdr.Linkname, name); err != nil {
		return err
	}
	if x.chown {
		_ = x.root.Lchown(name, hdr.Uid, hdr.Gid)
	}
	x.info.Symlinks++
	return nil
}

func (x *extractor) hardlink(name string, hdr *tar.Header) error {
	target, err := safeName(hdr.Linkname)
	if err != nil {
		return err
	}
	if err := x.replace(name); err != nil {
		return err
	}
	if err := x.root.Link(target, name); err != nil {
		return err
	}
	x.info.Files++
	return nil
}

// replace makes room for a non-directory entry: a later tar entry for
// the same path wins, as with tar itself. Parents are created.
func (x *extractor) replace(name string) error {
	if dir := path.Dir(name); dir != "." {
		if err := x.root.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	err := x.root.Remove(name)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
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
