package fsblob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestStreamLarge puts and gets 50 MB and shows neither side buffers the
// blob: while Put's source is half read, half the bytes are already in the
// temp file on disk, and the whole round trip allocates a small fraction of
// the blob's size.
func TestStreamLarge(t *testing.T) {
	const size = 50 << 20
	dir := t.TempDir()
	s := openTest(t, dir)
	ctx := context.Background()

	src := newGen(42, size)
	var onDiskAtHalf int64 = -1
	src.onRead = func(served int64) {
		if onDiskAtHalf < 0 && served >= size/2 {
			onDiskAtHalf = tempBytes(t, filepath.Join(dir, "big"))
		}
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)

	info, err := s.Put(ctx, "big/blob", src)
	if err != nil {
		t.Fatalf("Put: %v", err)
	}
	rc, ginfo, err := s.Get(ctx, "big/blob")
	if err != nil {
		t.Fatalf("Get: %v", err)
	}
	h := sha256.New()
	n, err := io.Copy(h, rc)
	rc.Close()
	runtime.ReadMemStats(&after)

	if err != nil || n != size {
		t.Fatalf("read back %d bytes, err %v; want %d", n, err, size)
	}
	want := genSHA256(42, size)
	if got := hex.EncodeToString(h.Sum(nil)); got != want || info.SHA256 != want || ginfo.SHA256 != want {
		t.Fatalf("sha256: read %s, Put info %s, Get info %s; want %s", got, info.SHA256, ginfo.SHA256, want)
	}
	if src.served != size || info.Size != size {
		t.Fatalf("source served %d, Put recorded %d; want %d", src.served, info.Size, size)
	}
	// Put copies through a 1 MiB buffer, so at the halfway read all but the
	// last buffer must already be in the temp file.
	if onDiskAtHalf < size/2-(1<<20) {
		t.Fatalf("temp file held %d bytes when the source had served %d: Put is buffering", onDiskAtHalf, size/2)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > size/8 {
		t.Fatalf("Put+Get of %d bytes allocated %d bytes: something holds the blob in memory", size, alloc)
	}
}

// tempBytes sums the sizes of temp files in dir.
func tempBytes(t *testing.T, dir string) int64 {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Errorf("read %s: %v", dir, err)
		return 0
	}
	var n int64
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), tempPrefix) {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
	}
	return n
}
