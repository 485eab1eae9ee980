package s3blob

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/blobtest"
	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
)

// TestGetBlobReplacedAfterItsFooter: when another writer replaces the blob
// between Get's two requests (its footer, then its bytes), Get starts over
// and returns the new blob whole and verified — never the new bytes checked
// against the old footer, which would read as corrupt.
func TestGetBlobReplacedAfterItsFooter(t *testing.T) {
	o := testOptions(t)
	writer := openTest(t, o)
	ctx := context.Background()
	// Larger than what Get's first request brings along with the footer.
	v1 := strings.Repeat("the first version ", smallBlob/10)
	v2 := strings.Repeat("version two, longer than the first ", smallBlob/10)
	if _, err := writer.Put(ctx, "k", strings.NewReader(v1)); err != nil {
		t.Fatal(err)
	}
	var footers atomic.Int32
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		resp, err := tr.RoundTrip(r)
		// Right after the first footer is served, another writer replaces
		// the blob.
		if err == nil && strings.HasPrefix(r.Header.Get("Range"), "bytes=-") && footers.Add(1) == 1 {
			if _, err := writer.Put(ctx, "k", strings.NewReader(v2)); err != nil {
				t.Error(err)
			}
		}
		return resp, err
	})}
	reader, err := Open(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	got, info := blobtest.ReadAll(t, reader, "k")
	if string(got) != v2 || info.Size != int64(len(got)) {
		t.Fatalf("Get = %d bytes (info %+v), want the second version's %d", len(got), info, len(v2))
	}
	if n := footers.Load(); n != 2 {
		t.Fatalf("Get read %d footers, want 2 (the replaced blob's, then the new one's)", n)
	}
}

// TestSmallBlobOneRequest: a blob that fits in Get's first request with
// its footer is read with that one request; a larger one takes two.
func TestSmallBlobOneRequest(t *testing.T) {
	o := testOptions(t)
	var gets atomic.Int32
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	o.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		if r.Method == http.MethodGet {
			gets.Add(1)
		}
		return tr.RoundTrip(r)
	})}
	s := openTest(t, o)
	for _, n := range []int{0, 1, smallBlob, smallBlob + 1} {
		data := strings.Repeat("s", n)
		if _, err := s.Put(context.Background(), "k", strings.NewReader(data)); err != nil {
			t.Fatal(err)
		}
		gets.Store(0)
		if got, _ := blobtest.ReadAll(t, s, "k"); string(got) != data {
			t.Fatalf("Get of %d bytes returned %d", n, len(got))
		}
		want := int32(1)
		if n > smallBlob {
			want = 2
		}
		if got := gets.Load(); got != want {
			t.Errorf("Get of a %d-byte blob took %d GET requests, want %d", n, got, want)
		}
	}
}

// TestReadsWhatFsblobWrote: an fsblob file copied as is into the bucket is
// the same blob to s3blob (one footer format), so a blob directory can be
// moved into a bucket with any S3 copy tool.
func TestReadsWhatFsblobWrote(t *testing.T) {
	s := openTest(t, testOptions(t))
	ctx := context.Background()
	dir := t.TempDir()
	fs, err := fsblob.Open(ctx, dir, fsblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	data := bytes.Repeat([]byte("moved "), 10_000)
	want, err := fs.Put(ctx, "backups/t/s/1.tar.zst", bytes.NewReader(data))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(dir + "/backups/t/s/1.tar.zst" + blob.ReservedSuffix)
	if err != nil {
		t.Fatal(err)
	}
	rawPut(t, s, "backups/t/s/1.tar.zst", raw)
	got, info := blobtest.ReadAll(t, s, "backups/t/s/1.tar.zst")
	if !bytes.Equal(got, data) || info.SHA256 != want.SHA256 || info.Size != want.Size {
		t.Fatalf("s3blob read %d bytes (info %+v) of what fsblob wrote as %+v", len(got), info, want)
	}
}
