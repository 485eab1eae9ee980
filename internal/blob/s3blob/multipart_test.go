package s3blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/blobtest"
)

// smallParts opens a store with the smallest parts S3 takes, so multipart
// uploads need only a few MiB.
func smallParts(t *testing.T) *Store {
	t.Helper()
	o := testOptions(t)
	o.PartSize, o.Concurrency = MinPartSize, 2
	return openTest(t, o)
}

// TestMultipartRoundTrip: blobs around part boundaries (the footer alone in
// the last part, data and footer ending exactly on a boundary) and across
// several parts read back whole, with the size and sha256 Put recorded.
func TestMultipartRoundTrip(t *testing.T) {
	s := smallParts(t)
	const p = MinPartSize
	for i, size := range []int64{p - blob.FooterLen, p - blob.FooterLen + 1, p, 2*p - blob.FooterLen, 3*p + 12345} {
		seed := uint64(i + 1)
		key := "mp/blob"
		info, err := s.Put(context.Background(), key, newGen(seed, size))
		if err != nil {
			t.Fatalf("Put(%d bytes): %v", size, err)
		}
		want := genSHA256(seed, size)
		if info.Size != size || info.SHA256 != want {
			t.Fatalf("Put(%d bytes) info = %+v, want sha256 %s", size, info, want)
		}
		got, ginfo := blobtest.ReadAll(t, s, key)
		if int64(len(got)) != size || ginfo.SHA256 != want || !bytes.Equal(got[:64], readN(t, newGen(seed, size), 64)) {
			t.Fatalf("Get after Put(%d bytes) = %d bytes, info %+v", size, len(got), ginfo)
		}
		if raw := rawGet(t, s, key); int64(len(raw)) != size+blob.FooterLen {
			t.Fatalf("stored object of a %d-byte blob is %d bytes, want the blob and a %d-byte footer", size, len(raw), blob.FooterLen)
		}
	}
	if us := uploads(t, s); len(us) != 0 {
		t.Fatalf("completed Puts left %d multipart uploads", len(us))
	}
}

func readN(t *testing.T, r io.Reader, n int) []byte {
	t.Helper()
	b := make([]byte, n)
	if _, err := io.ReadFull(r, b); err != nil {
		t.Fatal(err)
	}
	return b
}

// TestMultipartFailureKeepsOldBlob: a source that breaks, or a context
// cancelled, after some parts are uploaded leaves the old blob in place and
// no multipart upload behind (the engine aborts it).
func TestMultipartFailureKeepsOldBlob(t *testing.T) {
	s := smallParts(t)
	ctx := context.Background()
	if _, err := s.Put(ctx, "k", strings.NewReader("old")); err != nil {
		t.Fatal(err)
	}
	broken := newGen(1, 20<<20)
	broken.onRead = func(served int64) error {
		if served >= 12<<20 {
			return errors.New("source broke")
		}
		return nil
	}
	if _, err := s.Put(ctx, "k", broken); err == nil || !strings.Contains(err.Error(), "source broke") {
		t.Fatalf("Put from a source that broke after 12 MiB: err = %v", err)
	}

	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var cancelled atomic.Bool
	slow := newGen(2, 20<<20)
	slow.onRead = func(served int64) error {
		if served >= 11<<20 && !cancelled.Swap(true) {
			cancel()
		}
		return nil
	}
	if _, err := s.Put(cctx, "k", slow); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put cancelled after 11 MiB: err = %v, want context.Canceled", err)
	}
	if got, _ := blobtest.ReadAll(t, s, "k"); string(got) != "old" {
		t.Fatalf("after failed multipart Puts Get = %d bytes, want the old blob", len(got))
	}
	if us := uploads(t, s); len(us) != 0 {
		t.Fatalf("failed Puts left %d multipart uploads behind", len(us))
	}
}

// TestPutMemoryIsBounded: a Put holds at most Concurrency+1 parts,
// however large the blob.
func TestPutMemoryIsBounded(t *testing.T) {
	s := smallParts(t)
	if _, err := s.Put(context.Background(), "big", newGen(3, 8*MinPartSize+1)); err != nil {
		t.Fatal(err)
	}
	if peak, limit := s.peakBufs.Load(), int64(s.conc+1); peak > limit || peak < 2 {
		t.Fatalf("a Put of 9 parts held up to %d part buffers at once, want 2..%d", peak, limit)
	}
	if held := s.heldBufs.Load(); held != 0 {
		t.Fatalf("%d part buffers not handed back after Put", held)
	}
}
