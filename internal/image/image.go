// Package image manages the process driver's images: root filesystems
// kept as plain directories in the images dir ($AGENTKERNEL_HOME/images by
// default). A sandbox started with Spec.Image = NAME sees ImagesDir/NAME
// read-only as its /.
//
// Import extracts a tarball into a hidden temp dir in the images dir and
// renames it into place, so an image is either complete or absent; names
// starting with "." are never images.
package image

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"syscall"
	"time"

	"github.com/agentkernel/agentkernel/internal/safetar"
)

// Sentinel errors, wrapped with the image name.
var (
	ErrInvalidName = errors.New("invalid image name")
	ErrExists      = errors.New("image already exists")
	ErrNotFound    = errors.New("image not found")
	// ErrUnsafeEntry: the tarball has an entry that would land outside the
	// image (absolute path, "..") or cannot be extracted safely.
	ErrUnsafeEntry = safetar.ErrUnsafeEntry
)

// Info describes an image.
type Info struct {
	Name string `json:"name"`
	Path string `json:"path"` // host path of the rootfs
	// ImportedAt is when Import finished (the rootfs dir's mtime).
	ImportedAt time.Time `json:"imported_at"`
	Files      int64     `json:"files"` // regular files; hard links count once
	Dirs       int64     `json:"dirs"`
	Symlinks   int64     `json:"symlinks"`
	Bytes      int64     `json:"bytes"` // sum of regular file sizes
	// Skipped counts entries Import left out (devices, fifos).
	Skipped int64 `json:"skipped,omitempty"`
}

var nameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,62}$`)

// ValidateName checks an image name: [a-z0-9][a-z0-9._-]{0,62}.
func ValidateName(name string) error {
	if !nameRE.MatchString(name) {
		return fmt.Errorf("%w %q: use 1-63 characters of a-z, 0-9, '.', '_' and '-', starting with a letter or digit", ErrInvalidName, name)
	}
	return nil
}

// Dir returns the rootfs directory of an existing image.
func Dir(imagesDir, name string) (string, error) {
	if err := ValidateName(name); err != nil {
		return "", err
	}
	dir := filepath.Join(imagesDir, name)
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) || err == nil && !fi.IsDir() {
		return "", fmt.Errorf("%w: %q (no directory %s)", ErrNotFound, name, dir)
	}
	if err != nil {
		return "", err
	}
	return dir, nil
}

// Stat describes one image, walking its tree for the counts.
func Stat(ctx context.Context, imagesDir, name string) (Info, error) {
	dir, err := Dir(imagesDir, name)
	if err != nil {
		return Info{}, err
	}
	info := Info{Name: name, Path: dir}
	seen := map[[2]uint64]bool{} // hard links count once
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if p == dir {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			info.ImportedAt = fi.ModTime().UTC()
			return nil
		}
		switch {
		case d.IsDir():
			info.Dirs++
		case d.Type()&fs.ModeSymlink != 0:
			info.Symlinks++
		case d.Type().IsRegular():
			fi, err := d.Info()
			if err != nil {
				return nil // removed meanwhile
			}
			if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
				key := [2]uint64{uint64(st.Dev), st.Ino}
				if seen[key] {
					return nil
				}
				seen[key] = true
			}
			info.Files++
			info.Bytes += fi.Size()
		}
		return nil
	})
	if err != nil {
		return Info{}, fmt.Errorf("image %q: %w", name, err)
	}
	return info, nil
}

// List describes every image in imagesDir, by name; a missing imagesDir
// has none.
func List(ctx context.Context, imagesDir string) ([]Info, error) {
	entries, err := os.ReadDir(imagesDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []Info
	for _, e := range entries {
		// Hidden entries are imports and removals in progress.
		if !e.IsDir() || ValidateName(e.Name()) != nil {
			continue
		}
		info, err := Stat(ctx, imagesDir, e.Name())
		if errors.Is(err, ErrNotFound) {
			continue // removed meanwhile
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Remove deletes an image. It is renamed to a hidden name first, so a
// removal that fails half-way never leaves a partial image under its name.
// Sandboxes still running on the image lose its files: stop them first.
func Remove(_ context.Context, imagesDir, name string) error {
	dir, err := Dir(imagesDir, name)
	if err != nil {
		return err
	}
	trash, err := os.MkdirTemp(imagesDir, ".rm-"+name+"-")
	if err != nil {
		return err
	}
	gone := filepath.Join(trash, name)
	if err := os.Rename(dir, gone); err != nil {
		os.Remove(trash)
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: %q", ErrNotFound, name)
		}
		return err
	}
	return removeTree(trash)
}

// removeTree removes a tree even where directories are read-only.
func removeTree(dir string) error {
	err := os.RemoveAll(dir)
	if err == nil || !errors.Is(err, fs.ErrPermission) {
		return err
	}
	_ = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			_ = os.Chmod(p, 0o700)
		}
		return nil
	})
	return os.RemoveAll(dir)
}
