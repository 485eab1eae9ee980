package agentkernel

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// ObjectBundle is the app of a class defined through the API: a tar of it,
// stored by the daemon (verified by sha256 and length) and unpacked
// read-only at /app in the class's object sandboxes.
type ObjectBundle struct {
	Type   string `json:"type"`
	Class  string `json:"class"`
	SHA256 string `json:"sha256"`
	Size   int64  `json:"size"` // the archive as uploaded
	// Files and Bytes are what it unpacked to (set in UploadBundle's
	// answer).
	Files      int64     `json:"files,omitempty"`
	Bytes      int64     `json:"bytes,omitempty"`
	UploadedAt time.Time `json:"uploaded_at"`
}

func bundlePath(class string) string {
	return "/v1/objects/definitions/" + pathSegment(class) + "/bundle"
}

// UploadBundle uploads r, a tar of the app (plain, gzip or zstd), as the
// bundle of class, which must be defined (Define) first. The daemon checks
// and unpacks it before it replaces anything; objects woken from then on
// get it at /app, and objects running now keep their files until they
// hibernate. Entries that would leave the bundle (absolute paths, "..",
// links pointing out), device nodes and archives over the daemon's limits
// are refused with a 400 or 413 naming the problem.
func (s *ObjectsService) UploadBundle(ctx context.Context, class string, r io.Reader) (*ObjectBundle, error) {
	req, err := s.c.newRequest(ctx, http.MethodPut, bundlePath(class), r)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Accept", "application/json")
	resp, err := s.c.send(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var out ObjectBundle
	if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
		return nil, fmt.Errorf("decode the answer to the bundle upload of %s: %w", class, err)
	}
	return &out, nil
}

// UploadBundleDir packs dir into a tar.gz while it uploads it (PackBundle),
// as the bundle of class.
func (s *ObjectsService) UploadBundleDir(ctx context.Context, class, dir string) (*ObjectBundle, error) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("bundle %s: not a directory (%v)", dir, err)
	}
	pr, pw := io.Pipe()
	packed := make(chan error, 1)
	go func() {
		err := PackBundle(pw, dir)
		pw.CloseWithError(err)
		packed <- err
	}()
	b, err := s.UploadBundle(ctx, class, pr)
	// An upload the daemon refused early leaves the packer blocked on the
	// pipe: unblock it and wait, so it never outlives the call.
	pr.CloseWithError(errUploadEnded)
	if perr := <-packed; perr != nil && err != nil && !errors.Is(perr, errUploadEnded) {
		return nil, perr // the cause: the upload failed because packing did
	}
	return b, err
}

var errUploadEnded = errors.New("upload ended")

// PackBundle writes dir's tree as a tar.gz to w: directories, regular
// files and symlinks, named relative to dir (dir itself is the bundle's
// root, /app in the sandbox). Anything else (sockets, devices, FIFOs) is an
// error naming it.
func PackBundle(w io.Writer, dir string) error {
	zw := gzip.NewWriter(w)
	tw := tar.NewWriter(zw)
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		var link string
		switch {
		case fi.Mode().IsRegular(), fi.IsDir():
		case fi.Mode()&fs.ModeSymlink != 0:
			if link, err = os.Readlink(p); err != nil {
				return err
			}
		default:
			return fmt.Errorf("%s is a %s; a bundle holds only files, directories and symlinks", p, fi.Mode().Type())
		}
		hdr, err := tar.FileInfoHeader(fi, link)
		if err != nil {
			return err
		}
		hdr.Name = filepath.ToSlash(rel)
		if fi.IsDir() {
			hdr.Name += "/"
		}
		hdr.Uid, hdr.Gid, hdr.Uname, hdr.Gname = 0, 0, "", ""
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.Copy(tw, io.LimitReader(f, hdr.Size))
		if err == nil && n != hdr.Size {
			err = fmt.Errorf("%s changed size while it was packed", p)
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("pack bundle %s: %w", dir, err)
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return zw.Close()
}

// Bundle describes a class's bundle (a 404 *Error when it has none).
func (s *ObjectsService) Bundle(ctx context.Context, class string) (*ObjectBundle, error) {
	var out ObjectBundle
	if err := s.c.do(ctx, http.MethodGet, bundlePath(class), nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// DeleteBundle removes a class's bundle; objects woken later have no /app.
func (s *ObjectsService) DeleteBundle(ctx context.Context, class string) error {
	return s.c.do(ctx, http.MethodDelete, bundlePath(class), nil, nil)
}
