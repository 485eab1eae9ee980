// Package blobtest is the contract suite every blob.Store engine runs:
//
//	func TestContract(t *testing.T) {
//		blobtest.Exercise(t, func(t *testing.T) blob.Store { return openEngine(t) })
//	}
//
// Each subtest gets a fresh, empty store from the factory. What a suite
// cannot express engine-neutrally (corrupting stored bytes, crash safety)
// stays in the engine's own tests.
package blobtest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strconv"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// Factory returns a fresh, empty store; it registers its own cleanup.
type Factory func(t *testing.T) blob.Store

// Exercise runs the contract against the engine made by newStore.
func Exercise(t *testing.T, newStore Factory) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(t *testing.T, s blob.Store)
	}{
		{"RoundTrip", testRoundTrip},
		{"EmptyBlob", testEmptyBlob},
		{"Overwrite", testOverwrite},
		{"NotFound", testNotFound},
		{"DeleteIdempotent", testDeleteIdempotent},
		{"BlobAndPrefixShareName", testBlobAndPrefixShareName},
		{"ListOrderAndPrefix", testListOrderAndPrefix},
		{"InvalidKeys", testInvalidKeys},
		{"FailedReaderKeepsOldBlob", testFailedReaderKeepsOldBlob},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, newStore(t)) })
	}
}

func sum(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// ReadAll reads key fully through Get and fails the test on any error,
// including a verification failure at EOF.
func ReadAll(t *testing.T, s blob.Store, key string) ([]byte, blob.Info) {
	t.Helper()
	rc, info, err := s.Get(context.Background(), key)
	if err != nil {
		t.Fatalf("Get(%q): %v", key, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read %q: %v", key, err)
	}
	return b, info
}

func put(t *testing.T, s blob.Store, key string, data []byte) blob.Info {
	t.Helper()
	info, err := s.Put(context.Background(), key, bytes.NewReader(data))
	if err != nil {
		t.Fatalf("Put(%q): %v", key, err)
	}
	return info
}

func testRoundTrip(t *testing.T, s blob.Store) {
	data := bytes.Repeat([]byte("agentkernel "), 100_000)
	info := put(t, s, "backups/t1/s1/0001.tar.zst", data)
	if info.Key != "backups/t1/s1/0001.tar.zst" || info.Size != int64(len(data)) || info.SHA256 != sum(data) {
		t.Fatalf("Put info = %+v, want size %d sha256 %s", info, len(data), sum(data))
	}
	got, ginfo := ReadAll(t, s, info.Key)
	if !bytes.Equal(got, data) {
		t.Fatalf("Get returned %d bytes, want the %d written", len(got), len(data))
	}
	if ginfo.Size != info.Size || ginfo.SHA256 != info.SHA256 {
		t.Fatalf("Get info = %+v, want %+v", ginfo, info)
	}
	st, err := s.Stat(context.Background(), info.Key)
	if err != nil || st.Size != info.Size || st.SHA256 != info.SHA256 || st.Key != info.Key {
		t.Fatalf("Stat = %+v, %v; want %+v", st, err, info)
	}
}

func testEmptyBlob(t *testing.T, s blob.Store) {
	info := put(t, s, "empty", nil)
	if info.Size != 0 || info.SHA256 != sum(nil) {
		t.Fatalf("Put info = %+v, want size 0 sha256 %s", info, sum(nil))
	}
	if got, _ := ReadAll(t, s, "empty"); len(got) != 0 {
		t.Fatalf("Get(empty) = %d bytes", len(got))
	}
}

func testOverwrite(t *testing.T, s blob.Store) {
	put(t, s, "k", []byte("first version, longer"))
	put(t, s, "k", []byte("second"))
	if got, info := ReadAll(t, s, "k"); string(got) != "second" || info.Size != 6 {
		t.Fatalf("after overwrite Get = %q (info %+v), want %q", got, info, "second")
	}
}

func testNotFound(t *testing.T, s blob.Store) {
	ctx := context.Background()
	if _, _, err := s.Get(ctx, "missing/key"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Get(missing) err = %v, want ErrNotFound", err)
	}
	if _, err := s.Stat(ctx, "missing"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat(missing) err = %v, want ErrNotFound", err)
	}
	// A prefix of existing keys is not itself a blob.
	put(t, s, "dir/child", []byte("x"))
	if _, err := s.Stat(ctx, "dir"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat(dir) err = %v, want ErrNotFound", err)
	}
}

func testDeleteIdempotent(t *testing.T, s blob.Store) {
	ctx := context.Background()
	put(t, s, "a/b", []byte("x"))
	for i := range 2 {
		if err := s.Delete(ctx, "a/b"); err != nil {
			t.Fatalf("Delete #%d: %v", i+1, err)
		}
	}
	if _, err := s.Stat(ctx, "a/b"); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("Stat after Delete err = %v, want ErrNotFound", err)
	}
	if err := s.Delete(ctx, "never/was"); err != nil {
		t.Fatalf("Delete(never existed) = %v, want nil", err)
	}
}

func testBlobAndPrefixShareName(t *testing.T, s blob.Store) {
	put(t, s, "a", []byte("blob a"))
	put(t, s, "a/b", []byte("blob a/b"))
	if got, _ := ReadAll(t, s, "a"); string(got) != "blob a" {
		t.Fatalf("Get(a) = %q", got)
	}
	if got, _ := ReadAll(t, s, "a/b"); string(got) != "blob a/b" {
		t.Fatalf("Get(a/b) = %q", got)
	}
}

func listKeys(t *testing.T, s blob.Store, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range s.List(context.Background(), prefix) {
		if err != nil {
			t.Fatalf("List(%q): %v", prefix, err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

func testListOrderAndPrefix(t *testing.T, s blob.Store) {
	// Inserted out of order; byte-wise order puts "a-b" ('-') before "a/x" ('/')
	// before "a0" ('0').
	for _, k := range []string{"a0", "a/x/y", "b", "a", "a/x", "a-b", "s1/z", "s10/z"} {
		put(t, s, k, []byte(k))
	}
	cases := map[string][]string{
		"":     {"a", "a-b", "a/x", "a/x/y", "a0", "b", "s1/z", "s10/z"},
		"a/":   {"a/x", "a/x/y"},
		"a/x":  {"a/x", "a/x/y"},
		"a/x/": {"a/x/y"},
		"s1":   {"s1/z", "s10/z"},
		"s1/":  {"s1/z"},
		"zz":   nil,
		"q/r/": nil,
	}
	for prefix, want := range cases {
		got := listKeys(t, s, prefix)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("List(%q) = %q, want %q", prefix, got, want)
		}
	}
	for info, err := range s.List(context.Background(), "a/x/y") {
		if err != nil || info.Size != int64(len("a/x/y")) || info.SHA256 != sum([]byte("a/x/y")) {
			t.Fatalf("List info = %+v, %v", info, err)
		}
	}
	// Stopping early is allowed.
	for range s.List(context.Background(), "") {
		break
	}
}

// InvalidKeys are keys every engine must refuse with ErrInvalidKey.
var InvalidKeys = []string{
	"", "/etc/passwd", "../x", "a/../../b", "a/..", ".", "..", "a/./b", `a\b`, "a\x00b",
	"a//b", "a/", "/", "a\nb", ".hidden", "x.blob", "x.blob/y", strings.Repeat("k", 1025),
	strings.Repeat("s", 201) + "/x", "bad\xffutf8", "xml\uFFFEinvalid",
}

func testInvalidKeys(t *testing.T, s blob.Store) {
	ctx := context.Background()
	for _, key := range InvalidKeys {
		if _, err := s.Put(ctx, key, strings.NewReader("x")); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Put(%q) err = %v, want ErrInvalidKey", key, err)
		} else if len(key) < 100 && !strings.Contains(err.Error(), strconv.Quote(key)) {
			t.Errorf("Put(%q) error %q does not name the key", key, err)
		}
		if _, _, err := s.Get(ctx, key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Get(%q) err = %v, want ErrInvalidKey", key, err)
		}
		if _, err := s.Stat(ctx, key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Stat(%q) err = %v, want ErrInvalidKey", key, err)
		}
		if err := s.Delete(ctx, key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Delete(%q) err = %v, want ErrInvalidKey", key, err)
		}
	}
	for _, prefix := range []string{"/etc", "../", "a/../", `a\b`} {
		for _, err := range s.List(ctx, prefix) {
			if !errors.Is(err, blob.ErrInvalidKey) {
				t.Errorf("List(%q) err = %v, want ErrInvalidKey", prefix, err)
			}
		}
	}
}

type failingReader struct{ n int }

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n <= 0 {
		return 0, errors.New("source broke")
	}
	n := min(len(p), f.n)
	f.n -= n
	for i := range n {
		p[i] = 'z'
	}
	return n, nil
}

func testFailedReaderKeepsOldBlob(t *testing.T, s blob.Store) {
	ctx := context.Background()
	put(t, s, "k", []byte("old"))
	if _, err := s.Put(ctx, "k", &failingReader{n: 1 << 20}); err == nil {
		t.Fatal("Put from a failing reader succeeded")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Put(cctx, "k", strings.NewReader("new")); !errors.Is(err, context.Canceled) {
		t.Fatalf("Put with cancelled ctx err = %v, want context.Canceled", err)
	}
	if got, _ := ReadAll(t, s, "k"); string(got) != "old" {
		t.Fatalf("after failed Puts Get = %q, want %q", got, "old")
	}
	if keys := listKeys(t, s, ""); strings.Join(keys, ",") != "k" {
		t.Fatalf("List after failed Puts = %q, want [k] (no temp files)", keys)
	}
}
