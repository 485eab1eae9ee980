package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"
)

func infoFor(s string) Info {
	h := sha256.Sum256([]byte(s))
	return Info{Key: "k", Size: int64(len(s)), SHA256: hex.EncodeToString(h[:])}
}

func readVerified(src string, want Info) (string, error) {
	r := NewVerifyingReader(context.Background(), io.NopCloser(strings.NewReader(src)), want)
	b, err := io.ReadAll(r)
	return string(b), err
}

func TestVerifyingReader(t *testing.T) {
	want := infoFor("hello world")
	if got, err := readVerified("hello world", want); err != nil || got != "hello world" {
		t.Fatalf("intact: %q, %v", got, err)
	}
	cases := map[string]string{
		"hello World":   "sha256 mismatch",
		"hello worl":    "shorter than recorded",
		"hello world!!": "longer than recorded",
		"":              "shorter than recorded",
	}
	for src, reason := range cases {
		got, err := readVerified(src, want)
		var ce *CorruptError
		if !errors.Is(err, ErrCorrupt) || !errors.As(err, &ce) || ce.Reason != reason {
			t.Errorf("source %q: err = %v, want CorruptError %q", src, err, reason)
		}
		if len(got) > len("hello world") {
			t.Errorf("source %q: reader handed out %d bytes, more than recorded", src, len(got))
		}
	}
}

func TestVerifyingReaderErrorIsSticky(t *testing.T) {
	r := NewVerifyingReader(context.Background(), io.NopCloser(strings.NewReader("bad")), infoFor("good"))
	io.ReadAll(r)
	if _, err := r.Read(make([]byte, 8)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Read after a failed verification = %v, want ErrCorrupt again (not io.EOF)", err)
	}
}

func TestVerifyingReaderStopsOnCancel(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	r := NewVerifyingReader(ctx, io.NopCloser(strings.NewReader("hello world")), infoFor("hello world"))
	cancel()
	if _, err := r.Read(make([]byte, 4)); !errors.Is(err, context.Canceled) {
		t.Fatalf("Read after cancel = %v, want context.Canceled", err)
	}
}
