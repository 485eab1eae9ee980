package wsnap

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
)

func newStore(t testing.TB) (*Store, blob.Store) {
	t.Helper()
	b, err := fsblob.Open(context.Background(), t.TempDir(), fsblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	s := New(b, nil)
	s.racy = 0 // tests rewrite files within a second
	return s, b
}

func random(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, seed))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func write(t testing.TB, dir, rel string, data []byte, mode os.FileMode) {
	t.Helper()
	p := filepath.Join(dir, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

// tree describes dir: each path with its kind, mode and content or target.
func tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, _ := os.Readlink(p)
			out[rel] = "link " + target
		case fi.IsDir():
			out[rel] = "dir " + fi.Mode().Perm().String()
		default:
			b, _ := os.ReadFile(p)
			out[rel] = "file " + fi.Mode().Perm().String() + " " + string(b)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func sameTree(t testing.TB, got, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("restored %d paths %v, want %d %v", len(got), keys(got), len(want), keys(want))
	}
	for k, v := range want {
		if got[k] != v {
			g, w := got[k], v
			if len(g) > 80 {
				g = g[:80] + "…"
			}
			if len(w) > 80 {
				w = w[:80] + "…"
			}
			t.Fatalf("%s: restored %q, want %q", k, g, w)
		}
	}
}

func keys(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// TestRoundTrip: files (empty, small, several chunks), modes, nested
// directories and symlinks — one out of the workspace among them, kept as
// a link and never followed — come back as they were.
func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	ws := t.TempDir()
	write(t, ws, "empty", nil, 0o644)
	write(t, ws, "run.sh", []byte("#!/bin/sh\necho hi\n"), 0o755)
	write(t, ws, "a/b/c/deep.txt", []byte("deep"), 0o600)
	write(t, ws, "big.bin", random(1, 5<<20), 0o644)
	if err := os.Symlink("a/b", filepath.Join(ws, "inside")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/etc", filepath.Join(ws, "escape")); err != nil {
		t.Fatal(err)
	}
	id, st, err := s.Write(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if !ValidID(id) || st.Files != 4 || st.Symlinks != 2 || st.Dirs != 3 || st.Bytes != 5<<20+4+18 {
		t.Fatalf("Write = %s %+v", id, st)
	}
	if st.NewChunks < 5 {
		t.Fatalf("a 5 MiB file and three small ones stored %d chunks; want the big one cut in several", st.NewChunks)
	}
	out := t.TempDir()
	if _, err := s.Restore(ctx, id, out); err != nil {
		t.Fatal(err)
	}
	sameTree(t, tree(t, out), tree(t, ws))
	again, _, err := s.Write(ctx, ws)
	if err != nil || again != id {
		t.Fatalf("the same tree written again: %s, %v; want the same id %s", again, err, id)
	}
}

// TestIncremental: an unchanged workspace is not read again and stores
// nothing; changing 64 KiB in the middle of a 16 MiB file stores a few
// chunks around the change, not the file.
func TestIncremental(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	ws := t.TempDir()
	data := random(2, 16<<20)
	write(t, ws, "data.bin", data, 0o644)
	for i := range 20 {
		write(t, ws, filepath.Join("src", string(rune('a'+i))+".go"), random(uint64(10+i), 4096), 0o644)
	}
	_, first, err := s.Write(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	_, second, err := s.Write(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if second.ReadBytes != 0 || second.NewChunks != 0 {
		t.Fatalf("unchanged workspace: read %d bytes, stored %d chunks; want none", second.ReadBytes, second.NewChunks)
	}
	copy(data[8<<20:], random(3, 64<<10))
	write(t, ws, "data.bin", data, 0o644)
	id, third, err := s.Write(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if third.ReadBytes != 16<<20 {
		t.Fatalf("changed file read %d bytes, want it whole", third.ReadBytes)
	}
	if third.NewBytes > first.NewBytes/4 {
		t.Fatalf("64 KiB changed stored %d bytes (first snapshot %d): want a few chunks", third.NewBytes, first.NewBytes)
	}
	out := t.TempDir()
	if _, err := s.Restore(ctx, id, out); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(filepath.Join(out, "data.bin"))
	if !bytes.Equal(got, data) {
		t.Fatal("restored data.bin differs from the changed file")
	}
}

// TestCorruptChunk: a chunk whose stored bytes were replaced fails the
// restore instead of restoring wrong content.
func TestCorruptChunk(t *testing.T) {
	ctx := context.Background()
	s, b := newStore(t)
	ws := t.TempDir()
	write(t, ws, "f", []byte("original content"), 0o644)
	id, _, err := s.Write(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	for info, err := range b.List(ctx, chunkPrefix) {
		if err != nil {
			t.Fatal(err)
		}
		if _, err := b.Put(ctx, info.Key, bytes.NewReader(s.enc.EncodeAll([]byte("forged content!!"), nil))); err != nil {
			t.Fatal(err)
		}
	}
	_, err = s.Restore(ctx, id, t.TempDir())
	if !errors.Is(err, blob.ErrCorrupt) {
		t.Fatalf("restore of a forged chunk: %v, want ErrCorrupt", err)
	}
	if _, err := s.Restore(ctx, IDPrefix+strings.Repeat("0", 64), t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("restore of an unknown snapshot: %v", err)
	}
	if _, err := s.Restore(ctx, "../../etc/passwd", t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("restore of a malformed id: %v", err)
	}
}

// TestSwappedForASymlink: a directory the sandbox swaps for a symlink
// into the host is never followed.
func TestSwappedForASymlink(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	ws := t.TempDir()
	secret := t.TempDir()
	write(t, secret, "key", []byte("host secret"), 0o600)
	if err := os.Symlink(secret, filepath.Join(ws, "d")); err != nil {
		t.Fatal(err)
	}
	id, _, err := s.Write(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.manifest(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) != 1 || m.Entries[0].Kind != kindSymlink {
		t.Fatalf("manifest %+v: want the symlink alone, not what it points at", m.Entries)
	}
}

// TestCollect: a snapshot no longer live loses its manifest and the chunks
// only it held; a live one keeps everything and restores.
func TestCollect(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	ws := t.TempDir()
	write(t, ws, "shared", random(4, 3<<20), 0o644)
	write(t, ws, "gone", random(5, 1<<20), 0o644)
	a, _, err := s.Write(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(ws, "gone")); err != nil {
		t.Fatal(err)
	}
	write(t, ws, "new", random(6, 1<<20), 0o644)
	b, _, err := s.Write(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	want := tree(t, ws)
	// Young snapshots are kept whatever live says (their checkpoints may be
	// committing).
	rep, err := s.Collect(ctx, map[string]bool{b: true}, time.Hour, time.Now())
	if err != nil || rep.DeletedManifests != 0 || rep.DeletedChunks != 0 {
		t.Fatalf("collect within the grace period: %+v, %v", rep, err)
	}
	rep, err = s.Collect(ctx, map[string]bool{b: true}, 0, time.Now().Add(time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if rep.DeletedManifests != 1 || rep.DeletedChunks == 0 || rep.Manifests != 1 {
		t.Fatalf("collect: %+v", rep)
	}
	if _, err := s.Restore(ctx, a, t.TempDir()); !errors.Is(err, ErrNotFound) {
		t.Fatalf("restore of the collected snapshot: %v", err)
	}
	out := t.TempDir()
	if _, err := s.Restore(ctx, b, out); err != nil {
		t.Fatal(err)
	}
	sameTree(t, tree(t, out), want)
	// A Write after the pass does not count on a chunk it deleted.
	write(t, ws, "gone", random(5, 1<<20), 0o644)
	c, _, err := s.Write(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Restore(ctx, c, t.TempDir()); err != nil {
		t.Fatalf("restore of a snapshot that reuses a collected chunk's content: %v", err)
	}
}

// TestCollectForgetsWhatItDeleted: a file unchanged since snapshots that
// were all collected is read again by the next Write, never listed with
// chunks that are gone.
func TestCollectForgetsWhatItDeleted(t *testing.T) {
	ctx := context.Background()
	s, _ := newStore(t)
	ws := t.TempDir()
	write(t, ws, "x", random(7, 2<<20), 0o644)
	if _, _, err := s.Write(ctx, ws); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Collect(ctx, nil, 0, time.Now().Add(time.Second)); err != nil {
		t.Fatal(err)
	}
	id, st, err := s.Write(ctx, ws)
	if err != nil {
		t.Fatal(err)
	}
	if st.ReadBytes != 2<<20 || st.NewChunks == 0 {
		t.Fatalf("Write after its chunks were collected: %+v; want the file read and stored again", st)
	}
	if _, err := s.Restore(ctx, id, t.TempDir()); err != nil {
		t.Fatal(err)
	}
}
