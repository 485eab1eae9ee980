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
	if _, err := writer.Put(ctx, "k", strings.NewReader("the first version")); err != nil {
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
			if _, err := writer.Put(ctx, "k", strings.NewReader("version two, longer than the first")); err != nil {
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
	if string(got) != "version two, longer than the first" || info.Size != int64(len(got)) {
		t.Fatalf("Get = %q (info %+v), want the second version", got, info)
	}
	if n := footers.Load(); n != 2 {
		t.Fatalf("Get read %d footers, want 2 (the replaced blob's, then the new one's)", n)
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
