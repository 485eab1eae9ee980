package resources

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/beneath"
	"github.com/agentkernel/agentkernel/internal/memory"
	"github.com/agentkernel/agentkernel/internal/store"
)

// maxMemoryFiles bounds the files of a mounted memory store read back at
// a sync; one file is at most a memory's content (memory.MaxContentBytes).
const maxMemoryFiles = 10000

// memBase is what a memory of a read_write store was when the daemon put
// it in the sandbox (or last synced it): its version and content hash.
type memBase struct {
	VersionID string `json:"version_id"`
	SHA256    string `json:"sha256"`
}

func (l layout) memRW(name string) string { return filepath.Join(l.root, "memory-rw", name) }

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func memoryDocOf(r *store.SessionResource) (memoryDoc, error) {
	var d memoryDoc
	err := jsonInto(r.Doc, &d)
	return d, err
}

// relMemoryPath maps a memory's path ("/projects/a.md") to a relative file
// name, or "" when it is not one a directory can hold safely.
func relMemoryPath(p string) string {
	rel := strings.TrimPrefix(p, "/")
	if rel == "" || path.Clean(rel) != rel || strings.HasPrefix(rel, "../") || rel == ".." || strings.Contains(rel, "\x00") {
		return ""
	}
	for _, el := range strings.Split(rel, "/") {
		if el == ".." || el == "." {
			return ""
		}
	}
	return rel
}

// rwMemoryMounts are the read_write stores' binds (fixed at sandbox start).
func (s *Service) rwMemoryMounts(ctx context.Context, l layout, sessionID string) ([][2]string, error) {
	rs, err := s.List(ctx, sessionID)
	if err != nil {
		return nil, err
	}
	var out [][2]string
	for _, r := range rs {
		if r.Kind != KindMemoryStore {
			continue
		}
		d, err := memoryDocOf(r)
		if err != nil || d.Access != accessReadWrite {
			continue
		}
		src := l.memRW(d.Name)
		for _, dir := range []string{src, l.host(r.MountPath)} {
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return nil, err
			}
		}
		out = append(out, [2]string{src, r.MountPath})
	}
	return out, nil
}

// placeMemory writes a store's snapshot where the sandbox sees it: into
// the read-only tree, or into the store's read-write dir (through
// beneath: the sandbox may already have written there) with the base of
// every memory kept for the sync.
func (s *Service) placeMemory(ctx context.Context, l layout, st *state, r *store.SessionResource) error {
	d, err := memoryDocOf(r)
	if err != nil {
		return err
	}
	entries, err := s.memory().Snapshot(ctx, r.TenantID, d.MemoryStoreID)
	if err != nil {
		return fmt.Errorf("memory store resource %s (%s): %w", r.ID, d.MemoryStoreID, err)
	}
	if d.Access == accessReadOnly {
		dst := l.host(r.MountPath)
		tmp := dst + ".tmp"
		_ = os.RemoveAll(tmp)
		for _, e := range entries {
			rel := relMemoryPath(e.Path)
			if rel == "" {
				continue
			}
			p := filepath.Join(tmp, filepath.FromSlash(rel))
			if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
				return err
			}
			if err := os.WriteFile(p, []byte(e.Content), 0o444); err != nil {
				return err
			}
		}
		if err := os.MkdirAll(tmp, 0o755); err != nil {
			return err
		}
		_ = os.RemoveAll(dst)
		return os.Rename(tmp, dst)
	}
	if err := os.MkdirAll(l.memRW(d.Name), 0o755); err != nil {
		return err
	}
	root, err := beneath.OpenDir(l.memRW(d.Name))
	if err != nil {
		return err
	}
	defer root.Close()
	base := map[string]memBase{}
	made := map[string]bool{}
	for _, e := range entries {
		rel := relMemoryPath(e.Path)
		if rel == "" {
			continue
		}
		if err := writeBeneath(root, rel, []byte(e.Content), made); err != nil {
			return fmt.Errorf("memory store resource %s: %s: %w", r.ID, e.Path, err)
		}
		base[rel] = memBase{VersionID: e.VersionID, SHA256: hashOf(e.Content)}
	}
	if st.Mem == nil {
		st.Mem = map[string]map[string]memBase{}
	}
	st.Mem[r.ID] = base
	return nil
}

// writeBeneath writes name below root, making its directories (made
// remembers those already made), never through a symlink the sandbox put
// there.
func writeBeneath(root *os.File, name string, b []byte, made map[string]bool) error {
	dir := path.Dir(name)
	if dir != "." {
		parts := strings.Split(dir, "/")
		for i := range parts {
			sub := strings.Join(parts[:i+1], "/")
			if made[sub] {
				continue
			}
			parent, err := beneath.Open(root, path.Dir(sub), unix.O_PATH|unix.O_DIRECTORY, 0)
			if err != nil {
				return err
			}
			err = unix.Mkdirat(int(parent.Fd()), path.Base(sub), 0o755)
			parent.Close()
			if err != nil && !errors.Is(err, unix.EEXIST) {
				return err
			}
			made[sub] = true
		}
	}
	f, err := beneath.Open(root, name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC|unix.O_NONBLOCK, 0o644)
	if err != nil {
		return err
	}
	if fi, err := f.Stat(); err == nil && !fi.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("%s is not a regular file", name)
	}
	_, err = f.Write(b)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// syncMemory turns what the turn changed in a read_write store into
// memory versions: a file whose content differs from its base is a new
// version on that base (the memory service keeps a version made on a
// stale base as a version too, never dropping it), a new file a new
// memory, a missing one a deletion. The read goes through beneath.
func (s *Service) syncMemory(ctx context.Context, sess *store.ManagedSession, l layout, st *state, r *store.SessionResource) error {
	d, err := memoryDocOf(r)
	if err != nil || d.Access != accessReadWrite {
		return err
	}
	root, err := beneath.OpenDir(l.memRW(d.Name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer root.Close()
	var names []string
	if err := walkBeneathMax(root, ".", &names, maxMemoryFiles); err != nil {
		return err
	}
	base := st.Mem[r.ID]
	var changes []MemoryChange
	present := map[string]bool{}
	for _, name := range names {
		b, err := beneath.ReadFile(root, name, memory.MaxContentBytes+1)
		if err != nil {
			return err
		}
		present[name] = true
		content := string(b)
		// A file that can be no memory (too big, not text, a path the
		// SDK's rules refuse) stays in the sandbox unsynced; the others
		// still go back — Sync refuses a batch with one bad change.
		if err := errors.Join(memory.CheckPath("/"+name), memory.CheckContent(content)); err != nil {
			s.log.Warn("memory store file not synced", "session", sess.ID, "memory_store", d.MemoryStoreID, "file", name, "err", err)
			continue // present: a memory it replaced is not deleted either
		}
		old, had := base[name]
		if had && old.SHA256 == hashOf(content) {
			continue
		}
		changes = append(changes, MemoryChange{Path: "/" + name, Content: &content, BaseVersionID: old.VersionID})
	}
	for name, old := range base {
		if !present[name] {
			changes = append(changes, MemoryChange{Path: "/" + name, BaseVersionID: old.VersionID})
		}
	}
	if len(changes) == 0 {
		return nil
	}
	out, err := s.memory().Sync(ctx, sess.TenantID, d.MemoryStoreID, sess.ID, changes)
	if err != nil {
		return fmt.Errorf("memory store %s: sync: %w", d.MemoryStoreID, err)
	}
	s.failpoint(FailAfterMemorySync)
	if base == nil {
		base = map[string]memBase{}
	}
	if st.Mem == nil {
		st.Mem = map[string]map[string]memBase{}
	}
	for _, c := range changes {
		if c.Content == nil {
			delete(base, strings.TrimPrefix(c.Path, "/"))
		}
	}
	for _, e := range out {
		if rel := relMemoryPath(e.Path); rel != "" && present[rel] {
			base[rel] = memBase{VersionID: e.VersionID, SHA256: hashOf(e.Content)}
		}
	}
	st.Mem[r.ID] = base
	return nil
}
