package s3blob

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// TestCorruptObject: objects changed behind the engine's back — written
// straight through the S3 API — are reported as ErrCorrupt: a flipped byte
// when the reader reaches EOF, a changed length or a missing footer at once.
// Small blobs come whole with Get's first request, larger ones with a
// second: both ways verify.
func TestCorruptObject(t *testing.T) {
	for name, n := range map[string]int{"small": 1000, "large": 2 * smallBlob} {
		t.Run(name, func(t *testing.T) { testCorruptObject(t, n) })
	}
}

func testCorruptObject(t *testing.T, n int) {
	s := openTest(t, testOptions(t))
	ctx := context.Background()
	data := bytes.Repeat([]byte("agentkernel blob "), n/17+1)
	if _, err := s.Put(ctx, "c/blob", bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	stored := rawGet(t, s, "c/blob")

	t.Run("flipped data byte", func(t *testing.T) {
		b := bytes.Clone(stored)
		b[len(data)/2] ^= 1
		rawPut(t, s, "c/blob", b)
		rc, _, err := s.Get(ctx, "c/blob")
		if err != nil {
			t.Fatalf("Get refused early (%v); a flipped content byte only shows at EOF", err)
		}
		defer rc.Close()
		_, err = io.ReadAll(rc)
		var ce *blob.CorruptError
		if !errors.Is(err, blob.ErrCorrupt) || !errors.As(err, &ce) || ce.Reason != "sha256 mismatch" || ce.Key != "c/blob" {
			t.Fatalf("reading a blob with a flipped byte: err = %v, want ErrCorrupt (sha256 mismatch)", err)
		}
	})
	for name, b := range map[string][]byte{
		"truncated by one byte": stored[:len(stored)-1],
		"footer cut off":        stored[:len(data)],
		"extended":              append(bytes.Clone(stored), 'x'),
		"foreign object":        []byte("not written by agentkernel"),
		"empty object":          {},
	} {
		t.Run(name, func(t *testing.T) {
			rawPut(t, s, "c/blob", b)
			if _, _, err := s.Get(ctx, "c/blob"); !errors.Is(err, blob.ErrCorrupt) {
				t.Fatalf("Get: err = %v, want ErrCorrupt", err)
			}
			if _, err := s.Stat(ctx, "c/blob"); !errors.Is(err, blob.ErrCorrupt) {
				t.Fatalf("Stat: err = %v, want ErrCorrupt", err)
			}
			var errs []error
			for _, err := range s.List(ctx, "c/") {
				errs = append(errs, err)
			}
			if len(errs) != 1 || !errors.Is(errs[0], blob.ErrCorrupt) {
				t.Fatalf("List yielded %v, want one ErrCorrupt for the blob", errs)
			}
		})
	}
}
