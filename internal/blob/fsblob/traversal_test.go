package fsblob

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// TestTraversalKeysRefused: keys that would name a path outside the root are
// refused before any file access, with the key in the error.
func TestTraversalKeysRefused(t *testing.T) {
	parent := t.TempDir()
	s := openTest(t, filepath.Join(parent, "root"))
	ctx := context.Background()
	for _, key := range []string{"../x", "/etc/passwd", "a/../../b", `a\b`, `..\x`, "a/\x00/b"} {
		_, err := s.Put(ctx, key, strings.NewReader("payload"))
		var ke *blob.KeyError
		if !errors.As(err, &ke) || !errors.Is(err, blob.ErrInvalidKey) || ke.Key != key {
			t.Errorf("Put(%q) err = %v, want a KeyError naming the key", key, err)
		}
	}
	// Nothing was written next to the root.
	entries, _ := os.ReadDir(parent)
	if len(entries) != 1 {
		t.Fatalf("files appeared beside the root: %v", entries)
	}
}

// TestSymlinksInsideRootCannotEscape plants symlinks inside the root that
// point at a directory and a valid blob file outside it, as someone with
// write access to the blob directory might, and checks that no operation
// reads, lists, writes or deletes through them.
func TestSymlinksInsideRootCannotEscape(t *testing.T) {
	ctx := context.Background()
	outside, rootDir := t.TempDir(), t.TempDir()

	// A real, valid blob outside the root, so following a link would work.
	out := openTest(t, outside)
	if _, err := out.Put(ctx, "secret", strings.NewReader("secret bytes")); err != nil {
		t.Fatal(err)
	}
	stale := filepath.Join(outside, tempPrefix+"victim")
	if err := os.WriteFile(stale, []byte("not ours"), 0o644); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-24 * time.Hour)
	os.Chtimes(stale, old, old)

	s := openTest(t, rootDir)
	mustSymlink(t, outside, filepath.Join(rootDir, "evil"))                                                   // directory link
	mustSymlink(t, filepath.Join(outside, "secret"+blob.ReservedSuffix), filepath.Join(rootDir, "link.blob")) // file link
	mustSymlink(t, "../"+filepath.Base(outside), filepath.Join(rootDir, "rel"))                               // relative escape

	for _, key := range []string{"evil/secret", "link", "rel/secret"} {
		if rc, _, err := s.Get(ctx, key); err == nil {
			rc.Close()
			t.Errorf("Get(%q) followed a symlink out of the root", key)
		}
		if _, err := s.Stat(ctx, key); err == nil {
			t.Errorf("Stat(%q) followed a symlink out of the root", key)
		}
		s.Delete(ctx, key)
	}
	if _, err := out.Stat(ctx, "secret"); err != nil {
		t.Fatalf("Delete through a symlink removed the outside blob: %v", err)
	}
	for _, key := range []string{"evil/planted", "rel/planted"} {
		if _, err := s.Put(ctx, key, bytes.NewReader([]byte("x"))); err == nil {
			t.Errorf("Put(%q) wrote through a symlink out of the root", key)
		}
	}
	if _, err := os.Stat(filepath.Join(outside, "planted"+blob.ReservedSuffix)); err == nil {
		t.Fatal("a blob file appeared outside the root")
	}
	for info, err := range s.List(ctx, "") {
		t.Errorf("List yielded %+v, %v through a symlink", info, err)
	}
	if _, err := s.Cleanup(ctx, 0); err != nil {
		t.Fatalf("Cleanup: %v", err)
	}
	if _, err := os.Stat(stale); err != nil {
		t.Fatalf("Cleanup removed a file outside the root: %v", err)
	}
}

func mustSymlink(t *testing.T, target, name string) {
	t.Helper()
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}
