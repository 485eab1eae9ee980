package resources

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/beneath"
	"github.com/agentkernel/agentkernel/internal/store"
)

// maxOutputFiles bounds what one turn end collects.
const maxOutputFiles = 1000

// collectOutputs turns the regular files under /mnt/session/outputs into
// Files of the session, named by their path there. The directory is the
// sandbox's to write, so it is read only through internal/beneath: no
// symlink is followed, nothing but a regular file is read. A file that
// was collected before with the same content (same name and sha256 among
// the session's Files) is not collected again, so a TurnEnd run twice
// (recovery) adds nothing.
func (s *Service) collectOutputs(ctx context.Context, sess *store.ManagedSession, l layout) error {
	files := s.files()
	if files == nil {
		return nil
	}
	root, err := beneath.OpenDir(l.outputs())
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer root.Close()
	var names []string
	if err := walkBeneath(root, ".", &names); err != nil {
		return fmt.Errorf("outputs of session %s: %w", sess.ID, err)
	}
	if len(names) == 0 {
		return nil
	}
	have, err := files.ListBySession(ctx, sess.TenantID, sess.ID)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, f := range have {
		seen[f.Filename+"\x00"+f.SHA256] = true
	}
	var errs []error
	for _, name := range names {
		if err := s.collectOne(ctx, sess, root, name, seen); err != nil {
			errs = append(errs, fmt.Errorf("output %s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Service) collectOne(ctx context.Context, sess *store.ManagedSession, root *os.File, name string, seen map[string]bool) error {
	f, err := beneath.Open(root, name, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return nil
	}
	if fi.Size() > s.cfg.MaxOutputBytes {
		return fmt.Errorf("is %d bytes; the limit for an output is %d", fi.Size(), s.cfg.MaxOutputBytes)
	}
	h := sha256.New()
	if _, err := io.Copy(h, io.LimitReader(f, s.cfg.MaxOutputBytes+1)); err != nil {
		return err
	}
	sum := hex.EncodeToString(h.Sum(nil))
	if seen[name+"\x00"+sum] {
		return nil
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	// The content may change between the hash and the upload (the sandbox
	// is paused only between turns, and this runs between turns); the
	// Files service records the sha256 of what it stored.
	out, err := s.files().CreateOutput(ctx, sess.TenantID, sess.ID, name, io.LimitReader(f, s.cfg.MaxOutputBytes))
	if err != nil {
		return err
	}
	seen[name+"\x00"+out.SHA256] = true
	return nil
}

// walkBeneath lists the regular files below dir (relative names).
func walkBeneath(root *os.File, dir string, out *[]string) error {
	return walkBeneathMax(root, dir, out, maxOutputFiles)
}

// walkBeneathMax lists at most max regular files below dir.
func walkBeneathMax(root *os.File, dir string, out *[]string, max int) error {
	d, err := beneath.Open(root, dir, os.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		return err
	}
	for _, e := range ents {
		name := path.Join(dir, e.Name())
		switch {
		case e.Type().IsRegular():
			if len(*out) >= max {
				return fmt.Errorf("more than %d files; the rest are not read", max)
			}
			*out = append(*out, name)
		case e.IsDir():
			if err := walkBeneathMax(root, name, out, max); err != nil {
				return err
			}
		}
	}
	return nil
}
