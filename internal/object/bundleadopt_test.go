package object_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/object"
)

// Adopting bundles stored without a row (bundles/TENANT/CLASS): a sound
// one gets its content-addressed key and its row, keeping its upload
// time; one whose class already has a row (adopted before a crash kept the
// old key) only loses the old key; one whose class is gone, or that fails
// verification, is left for the GC with no row. A second run changes
// nothing.
func TestAdoptLegacyBundles(t *testing.T) {
	ctx := context.Background()
	root := t.TempDir()
	blobs, err := fsblob.Open(ctx, root, fsblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blobs.Close() })
	e := newEnv(t, func(c *object.Config) {
		c.Blobs = blobs
		c.BundleDir = t.TempDir()
	})
	for _, class := range []string{"sound", "readopt", "corrupt"} {
		if _, err := e.rt.DefineClass(ctx, "t1", object.ClassDef{Class: class, InitCommand: []string{"/app/counter"}}); err != nil {
			t.Fatal(err)
		}
	}
	var tgz bytes.Buffer
	if err := agentkernel.PackBundle(&tgz, e.app); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(tgz.Bytes())
	digest := hex.EncodeToString(sum[:])
	current := "bundles/t1/sha256/" + digest
	if _, err := e.rt.PutBundle(ctx, "t1", "readopt", bytes.NewReader(tgz.Bytes())); err != nil {
		t.Fatal(err)
	}
	for _, class := range []string{"sound", "readopt", "corrupt", "gone"} {
		if _, err := blobs.Put(ctx, "bundles/t1/"+class, bytes.NewReader(tgz.Bytes())); err != nil {
			t.Fatal(err)
		}
	}
	old, err := blobs.Stat(ctx, "bundles/t1/sound")
	if err != nil {
		t.Fatal(err)
	}
	flipByte(t, filepath.Join(root, "bundles", "t1", "corrupt"+blob.ReservedSuffix), 100)

	for run := range 2 {
		if err := e.rt.AdoptLegacyBundles(ctx); err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		var keys []string
		for in, err := range blobs.List(ctx, "bundles/") {
			if err != nil {
				t.Fatal(err)
			}
			keys = append(keys, in.Key)
		}
		want := []string{"bundles/t1/corrupt", "bundles/t1/gone", current}
		if !slices.Equal(keys, want) {
			t.Fatalf("run %d: blobs %v, want %v", run, keys, want)
		}
		for _, class := range []string{"sound", "readopt"} {
			b, err := e.rt.Bundle(ctx, "t1", class)
			if err != nil || b.SHA256 != digest || b.Size != int64(tgz.Len()) {
				t.Fatalf("run %d: bundle of %s: %+v %v", run, class, b, err)
			}
		}
		if b, _ := e.rt.Bundle(ctx, "t1", "sound"); !b.UploadedAt.Equal(old.ModTime.Truncate(time.Microsecond)) {
			t.Fatalf("run %d: adopted bundle uploaded at %v, want the old blob's %v", run, b.UploadedAt, old.ModTime)
		}
		if _, err := e.rt.Bundle(ctx, "t1", "corrupt"); !errors.Is(err, object.ErrNoBundle) {
			t.Fatalf("run %d: the corrupt bundle: %v, want no bundle", run, err)
		}
	}
	// The adopted one runs.
	if n := e.mustCall(t, key("sound", "a"), "increment", nil); n != 1 {
		t.Fatalf("increment on the adopted bundle: %d", n)
	}
}

func flipByte(t *testing.T, name string, off int64) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := []byte{0}
	if _, err := f.ReadAt(b, off); err != nil {
		t.Fatal(err)
	}
	b[0] ^= 0x01
	if _, err := f.WriteAt(b, off); err != nil {
		t.Fatal(err)
	}
}
