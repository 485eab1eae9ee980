package wsnap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"time"

	"github.com/restic/chunker"
	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/beneath"
)

// maxMemoDirs bounds the workspaces whose files Write remembers.
const maxMemoDirs = 256

// fileMemo is what a file was when last read, and its chunks then.
type fileMemo struct {
	dev, ino     uint64
	size         int64
	mtime, ctime int64
	chunks       []string
}

// Write snapshots dir (its contents) and returns the snapshot's id. dir is
// a sandbox's workspace, changing as it is read: every entry is opened
// beneath dir without following a symlink, and an entry swapped while it
// is read fails the Write (it is never followed). Sockets, FIFOs and
// devices are skipped.
func (s *Store) Write(ctx context.Context, dir string) (string, Stats, error) {
	s.gc.RLock()
	defer s.gc.RUnlock()
	start := time.Now()
	root, err := beneath.OpenDir(dir)
	if err != nil {
		return "", Stats{}, fmt.Errorf("snapshot %s: %w", dir, err)
	}
	defer root.Close()
	top, err := beneath.Open(root, ".", os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return "", Stats{}, fmt.Errorf("snapshot %s: %w", dir, err)
	}
	defer top.Close()
	s.mu.Lock()
	old := s.files[dir]
	s.mu.Unlock()
	w := &walker{s: s, ctx: ctx, old: old, memo: map[string]fileMemo{}, cutoff: start.Add(-s.racy).UnixNano(),
		ck: chunker.New(nil, pol), buf: make([]byte, chunker.MaxSize)}
	if err := w.dir(top, ""); err != nil {
		return "", w.st, fmt.Errorf("snapshot %s: %w", dir, err)
	}
	id, err := s.putManifest(ctx, &manifest{Version: manifestVersion, Entries: w.entries})
	if err != nil {
		return "", w.st, err
	}
	s.mu.Lock()
	if _, ok := s.files[dir]; !ok && len(s.files) >= maxMemoDirs {
		for k := range s.files { // any one: a cold workspace is read again once
			delete(s.files, k)
			break
		}
	}
	s.files[dir] = w.memo
	s.mu.Unlock()
	return id, w.st, nil
}

type walker struct {
	s       *Store
	ctx     context.Context
	old     map[string]fileMemo
	memo    map[string]fileMemo
	cutoff  int64
	ck      *chunker.Chunker
	buf     []byte
	entries []entry
	st      Stats
}

func (w *walker) dir(d *os.File, rel string) error {
	names, err := d.Readdirnames(-1)
	if err != nil {
		return err
	}
	sort.Strings(names)
	for _, name := range names {
		if err := w.ctx.Err(); err != nil {
			return err
		}
		if err := w.entry(d, name, path.Join(rel, name)); err != nil {
			return err
		}
	}
	return nil
}

func (w *walker) entry(parent *os.File, name, rel string) error {
	var lst unix.Stat_t
	if err := unix.Fstatat(int(parent.Fd()), name, &lst, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return &fs.PathError{Op: "lstat", Path: rel, Err: err}
	}
	e := entry{Path: rel, Mode: lst.Mode & 0o7777, UID: int(lst.Uid), GID: int(lst.Gid), MTime: lst.Mtim.Nano()}
	switch lst.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Kind, e.Size = kindFile, lst.Size
		if m, ok := w.old[rel]; ok && m.dev == lst.Dev && m.ino == lst.Ino && m.size == lst.Size &&
			m.mtime == lst.Mtim.Nano() && m.ctime == lst.Ctim.Nano() {
			e.Chunks = m.chunks
		} else {
			f, err := beneath.Open(parent, name, os.O_RDONLY|unix.O_NONBLOCK, 0)
			if err != nil {
				return changed(rel, err)
			}
			err = w.file(f, rel, &lst, &e)
			f.Close()
			if err != nil {
				return err
			}
		}
		if lst.Ctim.Nano() < w.cutoff {
			w.memo[rel] = fileMemo{dev: lst.Dev, ino: lst.Ino, size: lst.Size, mtime: lst.Mtim.Nano(), ctime: lst.Ctim.Nano(), chunks: e.Chunks}
		}
		w.st.Files++
		w.st.Bytes += e.Size
		w.entries = append(w.entries, e)
	case unix.S_IFDIR:
		f, err := beneath.Open(parent, name, os.O_RDONLY|unix.O_DIRECTORY, 0)
		if err != nil {
			return changed(rel, err)
		}
		defer f.Close()
		e.Kind = kindDir
		w.st.Dirs++
		w.entries = append(w.entries, e)
		return w.dir(f, rel)
	case unix.S_IFLNK:
		f, err := beneath.Open(parent, name, unix.O_PATH, 0)
		if err != nil {
			return changed(rel, err)
		}
		defer f.Close()
		if e.Link, err = beneath.Readlink(f); err != nil {
			return changed(rel, err)
		}
		e.Kind = kindSymlink
		w.st.Symlinks++
		w.entries = append(w.entries, e)
	default:
		w.st.Skipped++
	}
	return nil
}

// file chunks the content of f, which must still be the file lst saw.
func (w *walker) file(f *os.File, rel string, lst *unix.Stat_t, e *entry) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Ino != lst.Ino {
		return changed(rel, errors.New("it was replaced"))
	}
	w.ck.Reset(io.LimitReader(f, lst.Size), pol)
	var n int64
	for {
		c, err := w.ck.Next(w.buf)
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s: %w", rel, err)
		}
		sum, stored, err := w.s.putChunk(w.ctx, c.Data)
		if err != nil {
			return err
		}
		e.Chunks = append(e.Chunks, sum)
		n += int64(c.Length)
		if stored > 0 {
			w.st.NewChunks++
			w.st.NewBytes += stored
		}
	}
	if n != lst.Size {
		return fmt.Errorf("%s changed size while it was read (%d of %d bytes)", rel, n, lst.Size)
	}
	w.st.ReadBytes += n
	return nil
}

// changed: an entry was replaced while the snapshot was written.
func changed(rel string, err error) error {
	return fmt.Errorf("%s changed while it was read: %w", rel, err)
}
