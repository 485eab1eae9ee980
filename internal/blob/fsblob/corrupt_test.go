package fsblob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// corruptAndRead writes a blob, damages its file with damage, and returns
// Get's error and, if Get succeeded, the bytes and error of reading it.
func corruptAndRead(t *testing.T, damage func(name string, size int64)) (getErr error, data []byte, readErr error) {
	t.Helper()
	dir := t.TempDir()
	s := openTest(t, dir)
	ctx := context.Background()
	const size = 3<<20 + 17
	if _, err := s.Put(ctx, "c/blob", newGen(7, size)); err != nil {
		t.Fatal(err)
	}
	damage(filepath.Join(dir, "c", "blob"+blob.ReservedSuffix), size)
	rc, _, err := s.Get(ctx, "c/blob")
	if err != nil {
		return err, nil, nil
	}
	defer rc.Close()
	data, readErr = io.ReadAll(rc)
	return nil, data, readErr
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

func TestCorruptFlippedByteFailsAtEOF(t *testing.T) {
	for _, tc := range []struct {
		name string
		off  func(size int64) int64
	}{
		{"data", func(size int64) int64 { return size / 2 }},
		{"first byte", func(int64) int64 { return 0 }},
		{"last data byte", func(size int64) int64 { return size - 1 }},
		{"recorded sha256", func(size int64) int64 { return size + 8 + 5 }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getErr, data, readErr := corruptAndRead(t, func(name string, size int64) { flipByte(t, name, tc.off(size)) })
			if getErr != nil {
				t.Fatalf("Get refused early (%v); a flipped content byte is only detectable at EOF", getErr)
			}
			var ce *blob.CorruptError
			if !errors.Is(readErr, blob.ErrCorrupt) || !errors.As(readErr, &ce) {
				t.Fatalf("reading a blob with a flipped byte: err = %v, want ErrCorrupt", readErr)
			}
			if ce.Reason != "sha256 mismatch" || ce.GotSHA256 == ce.WantSHA256 || ce.Key != "c/blob" {
				t.Fatalf("corrupt error lacks evidence: %+v", ce)
			}
			if int64(len(data)) != ce.WantSize {
				t.Fatalf("read %d bytes before the error, want all %d", len(data), ce.WantSize)
			}
		})
	}
}

func TestCorruptLengthRefusedByGet(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, name string, size int64)
	}{
		{"truncated by one byte", func(t *testing.T, name string, size int64) { truncate(t, name, size+footerLen-1) }},
		{"truncated to half", func(t *testing.T, name string, size int64) { truncate(t, name, size/2) }},
		{"truncated to nothing", func(t *testing.T, name string, size int64) { truncate(t, name, 0) }},
		{"footer cut off", func(t *testing.T, name string, size int64) { truncate(t, name, size) }},
		{"bytes appended", func(t *testing.T, name string, size int64) { appendBytes(t, name, []byte("more")) }},
		{"footer size changed", func(t *testing.T, name string, size int64) { flipByte(t, name, size+7) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			getErr, _, readErr := corruptAndRead(t, func(name string, size int64) { tc.damage(t, name, size) })
			if !errors.Is(getErr, blob.ErrCorrupt) {
				t.Fatalf("Get of a damaged blob: err = %v (read err %v), want ErrCorrupt", getErr, readErr)
			}
		})
	}
}

func TestStatReportsCorruptLength(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir)
	if _, err := s.Put(context.Background(), "k", bytes.NewReader(make([]byte, 1000))); err != nil {
		t.Fatal(err)
	}
	truncate(t, filepath.Join(dir, "k"+blob.ReservedSuffix), 500)
	if _, err := s.Stat(context.Background(), "k"); !errors.Is(err, blob.ErrCorrupt) {
		t.Fatalf("Stat of truncated blob: err = %v, want ErrCorrupt", err)
	}
}

func truncate(t *testing.T, name string, size int64) {
	t.Helper()
	if err := os.Truncate(name, size); err != nil {
		t.Fatal(err)
	}
}

func appendBytes(t *testing.T, name string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
}
