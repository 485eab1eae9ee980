package s3blob

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	mrand "math/rand/v2"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentkernel/agentkernel/internal/testenv"
)

// testOptions names the test server, with a prefix no other test uses, so
// every store starts empty.
func testOptions(t testing.TB) Options {
	t.Helper()
	srv := testenv.S3(t)
	var b [6]byte
	rand.Read(b[:])
	return Options{Endpoint: srv.Endpoint, Region: srv.Region, Bucket: srv.Bucket,
		Prefix:      "test-" + hex.EncodeToString(b[:]) + "/",
		AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey, PathStyle: true}
}

// openTest opens a store on opts and, at cleanup, removes everything under
// its prefix.
func openTest(t testing.TB, opts Options) *Store {
	t.Helper()
	s, err := Open(context.Background(), opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() {
		emptyPrefix(t, s)
		s.Close()
	})
	return s
}

// emptyPrefix deletes the objects and aborts the multipart uploads under the
// store's prefix, through the raw client.
func emptyPrefix(t testing.TB, s *Store) {
	t.Helper()
	ctx := context.Background()
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket, Prefix: &s.prefix})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			t.Errorf("clean up %s: %v", s.prefix, err)
			return
		}
		for _, o := range page.Contents {
			if _, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: o.Key}); err != nil {
				t.Errorf("clean up %s: %v", aws.ToString(o.Key), err)
			}
		}
	}
	for _, u := range uploads(t, s) {
		s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: u.Key, UploadId: u.UploadId})
	}
}

type upload struct{ Key, UploadId *string }

// uploads lists the incomplete multipart uploads under the store's prefix.
func uploads(t testing.TB, s *Store) []upload {
	t.Helper()
	out, err := s.client.ListMultipartUploads(context.Background(), &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: &s.prefix})
	if err != nil {
		t.Fatalf("list multipart uploads: %v", err)
	}
	var us []upload
	for _, u := range out.Uploads {
		us = append(us, upload{u.Key, u.UploadId})
	}
	return us
}

// rawPut writes body as key's object directly, bypassing the engine.
func rawPut(t testing.TB, s *Store, key string, body []byte) {
	t.Helper()
	if _, err := s.client.PutObject(context.Background(), &s3.PutObjectInput{Bucket: &s.bucket,
		Key: aws.String(s.objectName(key)), Body: bytes.NewReader(body)}); err != nil {
		t.Fatalf("raw put %q: %v", key, err)
	}
}

// rawGet reads key's whole object directly, footer included.
func rawGet(t testing.TB, s *Store, key string) []byte {
	t.Helper()
	out, err := s.client.GetObject(context.Background(), &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.objectName(key))})
	if err != nil {
		t.Fatalf("raw get %q: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// genReader streams size deterministic pseudo-random bytes derived from
// seed without holding them.
type genReader struct {
	rng    *mrand.ChaCha8
	size   int64
	served int64
	// onRead, when set, runs before each Read with the bytes served so far;
	// an error it returns is the Read's.
	onRead func(served int64) error
}

func newGen(seed uint64, size int64) *genReader {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	return &genReader{rng: mrand.NewChaCha8(key), size: size}
}

func (g *genReader) Read(p []byte) (int, error) {
	if g.onRead != nil {
		if err := g.onRead(g.served); err != nil {
			return 0, err
		}
	}
	if g.served >= g.size {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), g.size-g.served)]
	g.rng.Read(p)
	g.served += int64(len(p))
	return len(p), nil
}

// genSHA256 is the sha256 of newGen(seed, size)'s stream.
func genSHA256(seed uint64, size int64) string {
	h := sha256.New()
	io.CopyBuffer(h, newGen(seed, size), make([]byte, 1<<20))
	return hex.EncodeToString(h.Sum(nil))
}

// roundTripFunc lets a test act between the engine's requests.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
