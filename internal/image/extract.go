package image

import (
	"archive/tar"
	"context"
	"errors"
	"io"
	"syscall"

	"github.com/agentkernel/agentkernel/internal/safetar"
)

var errNotEmpty = syscall.ENOTEMPTY

// tarReader returns a tar reader over r, decompressed as its magic says.
func tarReader(r io.Reader) (*tar.Reader, func(), error) { return safetar.NewReader(r) }

// extract writes every entry of tr into dir (see safetar.Extract).
func extract(ctx context.Context, tr *tar.Reader, dir string) (Info, error) {
	st, err := safetar.Extract(ctx, tr, dir, safetar.Rootfs())
	info := Info{Files: st.Files, Dirs: st.Dirs, Symlinks: st.Symlinks, Bytes: st.Bytes, Skipped: st.Skipped}
	if err != nil {
		return info, err
	}
	if info.Files+info.Dirs+info.Symlinks == 0 {
		return info, errors.New("the tarball has no files")
	}
	return info, nil
}
