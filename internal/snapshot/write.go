package snapshot

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
	"syscall"

	"github.com/klauspost/compress/zstd"
	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/beneath"
)

// WriteOptions tune Write.
type WriteOptions struct {
	// Exclude, when set, leaves out entries whose slash-separated path
	// relative to the root it returns true for (a directory excludes its
	// subtree).
	Exclude func(rel string) bool
	// Level is the zstd level; default SpeedFastest (like `zstd -1`).
	Level zstd.EncoderLevel
	// Runtime, if set, is a second directory (the guest's durable records)
	// archived after dir as a second tar archive in the same zstd stream.
	// A reader that knows only the first part (an earlier version) stops
	// at its end; Extract and Replace restore it into their second
	// directory. A missing Runtime directory is archived as empty.
	Runtime string
}

// Write archives dir (its contents, not dir itself) as tar + zstd to w.
//
// dir is a sandbox's workspace, which the sandbox may be changing while it
// is archived: every entry is opened beneath dir without following any
// symlink (package beneath), and its header comes from the opened file
// itself. An entry swapped for a symlink, or a directory for a symlink
// into the host, makes the snapshot fail; it is never followed. FIFOs,
// sockets and devices are skipped without being opened.
func Write(ctx context.Context, dir string, w io.Writer, opts WriteOptions) (Stats, error) {
	var st Stats
	if opts.Level == 0 {
		opts.Level = zstd.SpeedFastest
	}
	zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(opts.Level), zstd.WithEncoderConcurrency(2))
	if err != nil {
		return st, err
	}
	buf := make([]byte, 1<<20)
	if err := writePart(ctx, zw, dir, false, buf, opts.Exclude, &st); err != nil {
		zw.Close()
		return st, err
	}
	if opts.Runtime != "" {
		if err := writePart(ctx, zw, opts.Runtime, true, buf, nil, &st); err != nil {
			zw.Close()
			return st, err
		}
	}
	if err := zw.Close(); err != nil {
		return st, err
	}
	return st, nil
}

// writePart writes dir as one tar archive (with its end marker) to w.
func writePart(ctx context.Context, w io.Writer, dir string, missingOK bool, buf []byte, exclude func(string) bool, st *Stats) error {
	tw := tar.NewWriter(w)
	root, err := beneath.OpenDir(dir)
	if errors.Is(err, fs.ErrNotExist) && missingOK {
		return tw.Close()
	}
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", dir, err)
	}
	defer root.Close()
	top, err := beneath.Open(root, ".", os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return fmt.Errorf("snapshot %s: %w", dir, err)
	}
	defer top.Close()
	a := &archiver{ctx: ctx, tw: tw, buf: buf, exclude: exclude, st: st}
	if err := a.dir(top, ""); err != nil {
		return fmt.Errorf("snapshot %s: %w", dir, err)
	}
	return tw.Close()
}

type archiver struct {
	ctx     context.Context
	tw      *tar.Writer
	buf     []byte
	exclude func(rel string) bool
	st      *Stats
}

// dir archives the entries of d (at rel, "" for the root) in lexical
// order, directories before their contents.
func (a *archiver) dir(d *os.File, rel string) error {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if err := a.ctx.Err(); err != nil {
			return err
		}
		if err := a.entry(d, name, path.Join(rel, name)); err != nil {
			return err
		}
	}
	return nil
}

func (a *archiver) entry(parent *os.File, name, rel string) error {
	if a.exclude != nil && a.exclude(rel) {
		return nil
	}
	var lst unix.Stat_t
	if err := unix.Fstatat(int(parent.Fd()), name, &lst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	var flag int
	switch lst.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		flag = os.O_RDONLY | unix.O_NONBLOCK
	case unix.S_IFDIR:
		flag = os.O_RDONLY | unix.O_DIRECTORY
	case unix.S_IFLNK:
		flag = unix.O_PATH // with O_NOFOLLOW: the link itself
	default:
		a.st.Skipped++
		return nil
	}
	f, err := beneath.Open(parent, name, flag, 0)
	if err != nil {
		return changed(rel, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if uint32(fi.Sys().(*syscall.Stat_t).Mode)&unix.S_IFMT != lst.Mode&unix.S_IFMT {
		return changed(rel, errors.New("its type changed"))
	}
	var link string
	if fi.Mode()&fs.ModeSymlink != 0 {
		if link, err = beneath.Readlink(f); err != nil {
			return changed(rel, err)
		}
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
	if err := a.tw.WriteHeader(hdr); err != nil {
		return err
	}
	switch {
	case fi.IsDir():
		a.st.Dirs++
		return a.dir(f, rel)
	case link != "":
		a.st.Symlinks++
	default:
		n, err := io.CopyBuffer(a.tw, io.LimitReader(f, hdr.Size), a.buf)
		if err != nil {
			return err
		}
		if n != hdr.Size {
			return fmt.Errorf("snapshot: %s changed size while archiving (%d of %d bytes)", rel, n, hdr.Size)
		}
		a.st.Files++
		a.st.Bytes += n
	}
	return nil
}

// changed: an entry was replaced while the archive was written.
func changed(rel string, err error) error {
	return fmt.Errorf("snapshot: %s changed while archiving: %w", rel, err)
}
