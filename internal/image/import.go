package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"
)

// Import extracts a root filesystem tarball (plain tar, gzip or zstd,
// told apart by magic bytes) into imagesDir/name. It extracts into a
// hidden temp dir in imagesDir and renames it into place, so the image
// appears whole or not at all. An existing image is an ErrExists unless
// force, which replaces it (sandboxes still running on the old one lose
// its files: stop them first). imagesDir is created if missing.
func Import(ctx context.Context, imagesDir, name string, r io.Reader, force bool) (Info, error) {
	if err := ValidateName(name); err != nil {
		return Info{}, err
	}
	dst := filepath.Join(imagesDir, name)
	if _, err := os.Lstat(dst); err == nil && !force {
		return Info{}, fmt.Errorf("%w: %q (use --force to replace it)", ErrExists, name)
	}
	tr, closeTar, err := tarReader(r)
	if err != nil {
		return Info{}, fmt.Errorf("image %q: %w", name, err)
	}
	defer closeTar()
	if err := os.MkdirAll(imagesDir, 0o755); err != nil {
		return Info{}, err
	}
	tmp, err := os.MkdirTemp(imagesDir, ".import-"+name+"-")
	if err != nil {
		return Info{}, err
	}
	info, err := extract(ctx, tr, tmp)
	if err == nil {
		err = finishRoot(tmp)
	}
	if err == nil {
		err = swapIn(tmp, dst, name, force)
	}
	if err != nil {
		_ = removeTree(tmp)
		return Info{}, fmt.Errorf("image %q: %w", name, err)
	}
	// Counted from the tree, as List does, so both agree.
	final, err := Stat(context.WithoutCancel(ctx), imagesDir, name)
	if err != nil {
		return Info{}, err
	}
	final.Skipped = info.Skipped
	return final, nil
}

// finishRoot makes the rootfs dir what a / should be: 0755, with the
// import time as its mtime (Stat reports it as ImportedAt).
func finishRoot(dir string) error {
	if err := os.Chmod(dir, 0o755); err != nil {
		return err
	}
	now := time.Now()
	return os.Chtimes(dir, now, now)
}

// swapIn renames tmp to dst. With force an existing dst is moved aside
// first and removed after; without it a dst that appeared meanwhile (a
// concurrent import) makes rename fail, reported as ErrExists.
func swapIn(tmp, dst, name string, force bool) error {
	var old string
	if force {
		if _, err := os.Lstat(dst); err == nil {
			old = tmp + ".old"
			if err := os.Rename(dst, old); err != nil {
				return err
			}
		}
	}
	if err := os.Rename(tmp, dst); err != nil {
		if old != "" {
			_ = os.Rename(old, dst)
		}
		if errors.Is(err, fs.ErrExist) || errors.Is(err, errNotEmpty) {
			return fmt.Errorf("%w: %q", ErrExists, name)
		}
		return err
	}
	if old != "" {
		return removeTree(old)
	}
	return nil
}
