package wsnap

import (
	"archive/tar"
	"context"
	"fmt"
	"io"
	"time"

	"github.com/agentkernel/agentkernel/internal/safetar"
)

// Restore writes snapshot id into dir (an existing directory, normally
// empty: entries of the snapshot replace what dir holds at their paths).
// The manifest becomes a tar stream that safetar extracts, so nothing is
// written outside dir whatever the manifest says.
func (s *Store) Restore(ctx context.Context, id, dir string) (safetar.Stats, error) {
	m, err := s.manifest(ctx, id)
	if err != nil {
		return safetar.Stats{}, err
	}
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := s.writeTar(ctx, m, pw)
		pw.CloseWithError(err)
		done <- err
	}()
	st, err := safetar.Extract(ctx, tar.NewReader(pr), dir, safetar.Workspace())
	pr.CloseWithError(fmt.Errorf("extract stopped"))
	werr := <-done
	if err == nil && werr != nil {
		err = werr
	}
	if err != nil {
		return st, fmt.Errorf("restore snapshot %s: %w", id, err)
	}
	return st, nil
}

// writeTar writes the manifest's tree as a tar stream.
func (s *Store) writeTar(ctx context.Context, m *manifest, w io.Writer) error {
	tw := tar.NewWriter(w)
	for _, e := range m.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr := &tar.Header{Name: e.Path, Mode: int64(e.Mode), Uid: e.UID, Gid: e.GID,
			ModTime: time.Unix(0, e.MTime), Format: tar.FormatPAX}
		switch e.Kind {
		case kindDir:
			hdr.Typeflag, hdr.Name = tar.TypeDir, e.Path+"/"
		case kindSymlink:
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, e.Link
		case kindFile:
			hdr.Typeflag, hdr.Size = tar.TypeReg, e.Size
		default:
			return fmt.Errorf("entry %q: unknown kind %q", e.Path, e.Kind)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		var n int64
		for _, sum := range e.Chunks {
			data, err := s.chunk(ctx, sum)
			if err != nil {
				return fmt.Errorf("entry %q: %w", e.Path, err)
			}
			if n += int64(len(data)); n > e.Size {
				return fmt.Errorf("entry %q: chunks hold more than its %d bytes", e.Path, e.Size)
			}
			if _, err := tw.Write(data); err != nil {
				return err
			}
		}
		if n != e.Size {
			return fmt.Errorf("entry %q: chunks hold %d of its %d bytes", e.Path, n, e.Size)
		}
	}
	return tw.Close()
}
