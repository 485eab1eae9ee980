package fsblob

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"strings"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// tempPrefix starts every temp file name. Key segments may not start with
// ".", so no blob or directory can be confused with a temp file.
const tempPrefix = ".tmp-"

// copyBufSize: large writes keep the syscall count low for big snapshots.
const copyBufSize = 1 << 20

// Put writes r to key atomically; see blob.Store.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (blob.Info, error) {
	if err := blob.ValidateKey(key); err != nil {
		return blob.Info{}, err
	}
	name := fileName(key)
	dir := path.Dir(name)
	if err := s.mkdirAll(dir); err != nil {
		return blob.Info{}, fmt.Errorf("fsblob: put %q: %w", key, err)
	}
	tmp := path.Join(dir, tempPrefix+randomHex())
	s.writing.Store(tmp, struct{}{})
	defer s.writing.Delete(tmp)
	f, err := s.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return blob.Info{}, fmt.Errorf("fsblob: put %q: create temp file: %w", key, err)
	}
	committed := false
	defer func() {
		if !committed {
			f.Close()
			s.root.Remove(tmp)
		}
	}()

	h := sha256.New()
	n, err := io.CopyBuffer(io.MultiWriter(f, h), ctxReader{ctx: ctx, r: r}, make([]byte, copyBufSize))
	if err != nil {
		return blob.Info{}, fmt.Errorf("fsblob: put %q: write after %d bytes: %w", key, n, err)
	}
	sum := h.Sum(nil)
	if _, err := f.Write(blob.AppendFooter(make([]byte, 0, footerLen), n, sum)); err != nil {
		return blob.Info{}, fmt.Errorf("fsblob: put %q: write footer: %w", key, err)
	}
	// The data must be on disk before the rename makes it reachable, or a
	// power cut could publish a name pointing at unwritten blocks.
	if err := f.Sync(); err != nil {
		return blob.Info{}, fmt.Errorf("fsblob: put %q: fsync: %w", key, err)
	}
	fi, err := f.Stat()
	if err != nil {
		return blob.Info{}, fmt.Errorf("fsblob: put %q: %w", key, err)
	}
	if err := f.Close(); err != nil {
		return blob.Info{}, fmt.Errorf("fsblob: put %q: close: %w", key, err)
	}
	// A cancelled Put must not replace the old blob.
	if err := ctx.Err(); err != nil {
		return blob.Info{}, fmt.Errorf("fsblob: put %q: %w", key, err)
	}
	if err := s.root.Rename(tmp, name); err != nil {
		return blob.Info{}, fmt.Errorf("fsblob: put %q: rename into place: %w", key, err)
	}
	committed = true
	if err := s.syncDir(dir); err != nil {
		return blob.Info{}, fmt.Errorf("fsblob: put %q: fsync directory: %w", key, err)
	}
	return blob.Info{Key: key, Size: n, SHA256: hex.EncodeToString(sum), ModTime: fi.ModTime()}, nil
}

// mkdirAll creates dir and its parents, fsyncing the parent of every
// directory it creates so the new entries survive a power cut.
func (s *Store) mkdirAll(dir string) error {
	if dir == "." {
		return nil
	}
	segs := strings.Split(dir, "/")
	for i := range segs {
		p := strings.Join(segs[:i+1], "/")
		err := s.root.Mkdir(p, 0o755)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("create directory %s: %w", p, err)
		}
		if err := s.syncDir(path.Dir(p)); err != nil {
			return fmt.Errorf("fsync directory %s: %w", path.Dir(p), err)
		}
	}
	return nil
}

func (s *Store) syncDir(dir string) error {
	d, err := s.root.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func randomHex() string {
	var b [12]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// ctxReader stops a long copy once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}
