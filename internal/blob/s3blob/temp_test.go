package s3blob

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestRemoveTempAbortsDeadUploads: the multipart upload of a writer that
// died (started through the raw API, never completed) is aborted and
// counted with its parts' bytes; this process's Put in flight at the same
// moment is left alone and completes.
func TestRemoveTempAbortsDeadUploads(t *testing.T) {
	o := testOptions(t)
	o.PartSize, o.Concurrency = MinPartSize, 1
	s := openTest(t, o)
	ctx := context.Background()

	dead := s.objectName("backups/t/s/dead")
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &dead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.client.UploadPart(ctx, &s3.UploadPartInput{Bucket: &s.bucket, Key: &dead, UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(make([]byte, 1234))}); err != nil {
		t.Fatal(err)
	}

	// A Put of ours, held after its first parts until RemoveTemp has run.
	reached, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	src := newGen(1, 3*MinPartSize)
	src.onRead = func(served int64) error {
		if served >= 2*MinPartSize {
			once.Do(func() {
				close(reached)
				<-release
			})
		}
		return nil
	}
	done := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, "backups/t/s/live", src)
		done <- err
	}()
	<-reached
	if n := len(uploads(t, s)); n != 2 {
		t.Fatalf("%d multipart uploads in progress, want the dead one and ours", n)
	}

	// Everything started before a cutoff in the future is old enough.
	rep, err := s.RemoveTemp(ctx, time.Now().Add(time.Hour))
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("our Put in flight failed after RemoveTemp: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != 1 || rep.Bytes != 1234 {
		t.Fatalf("RemoveTemp report %+v, want the dead upload: 1 upload of 1234 bytes", rep)
	}
	if us := uploads(t, s); len(us) != 0 {
		t.Fatalf("%d multipart uploads left", len(us))
	}

	// A cutoff before the upload started keeps it.
	young := s.objectName("young")
	up, err = s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &young})
	if err != nil {
		t.Fatal(err)
	}
	if rep, err := s.RemoveTemp(ctx, time.Now().Add(-time.Hour)); err != nil || rep.Files != 0 {
		t.Fatalf("RemoveTemp with a past cutoff: %+v, %v; want the young upload kept", rep, err)
	}
	if us := uploads(t, s); len(us) != 1 || aws.ToString(us[0].UploadId) != aws.ToString(up.UploadId) {
		t.Fatalf("uploads after RemoveTemp with a past cutoff: %v", us)
	}
}
