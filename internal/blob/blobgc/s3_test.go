package blobgc_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/blobgc"
	"github.com/agentkernel/agentkernel/internal/blob/s3blob"
	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// TestCollectsOnS3: the collector needs nothing of the fs engine. On the s3
// engine it deletes the old blob no row holds, keeps the referenced one,
// and aborts a dead writer's multipart upload (the s3 engine's temp file),
// counting its bytes.
func TestCollectsOnS3(t *testing.T) {
	srv := testenv.S3(t)
	ctx := context.Background()
	var b [6]byte
	rand.Read(b[:])
	prefix := "blobgc-" + hex.EncodeToString(b[:]) + "/"
	blobs, err := s3blob.Open(ctx, s3blob.Options{Endpoint: srv.Endpoint, Region: srv.Region, Bucket: srv.Bucket,
		Prefix: prefix, AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	defer blobs.Close()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	defer tr.CloseIdleConnections()
	raw := s3.New(s3.Options{BaseEndpoint: &srv.Endpoint, Region: srv.Region, UsePathStyle: true, HTTPClient: &http.Client{Transport: tr},
		Credentials: aws.CredentialsProviderFunc(func(context.Context) (aws.Credentials, error) {
			return aws.Credentials{AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey}, nil
		})})
	defer func() {
		for info := range blobs.List(ctx, "") {
			blobs.Delete(ctx, info.Key)
		}
		blobs.RemoveTemp(ctx, time.Now().Add(time.Hour))
	}()
	st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()

	for key, n := range map[string]int{"backups/t/s/kept.tar.zst": 10, "backups/t/s/orphan.tar.zst": 300} {
		if _, err := blobs.Put(ctx, key, strings.NewReader(strings.Repeat("x", n))); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Now()
	if _, err := st.CreateBackup(ctx, &store.Backup{ID: "bkp_kept", SandboxID: "sbx_1", BlobKey: "backups/t/s/kept.tar.zst",
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		t.Fatal(err)
	}
	dead := prefix + "backups/t/s/dead.tar.zst" + blob.ReservedSuffix
	up, err := raw.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &srv.Bucket, Key: &dead})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := raw.UploadPart(ctx, &s3.UploadPartInput{Bucket: &srv.Bucket, Key: &dead, UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: bytes.NewReader(make([]byte, 777))}); err != nil {
		t.Fatal(err)
	}

	// Everything was written less than a second ago: a clock two hours
	// ahead makes it all older than the hour of grace.
	gc, err := blobgc.New(blobgc.Config{Blobs: blobs, Refs: st, Grace: time.Hour, Clock: clock.NewFake(now.Add(2 * time.Hour)),
		Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	rep := gc.CollectOnce(ctx)
	want := blobgc.Report{Scanned: 2, Referenced: 1, Blobs: 1, BlobBytes: 300, TempFiles: 1, TempBytes: 777}
	if rep != want {
		t.Fatalf("report %+v, want %+v", rep, want)
	}
	if _, err := blobs.Stat(ctx, "backups/t/s/kept.tar.zst"); err != nil {
		t.Fatalf("referenced blob: %v", err)
	}
	if _, err := blobs.Stat(ctx, "backups/t/s/orphan.tar.zst"); err == nil {
		t.Fatal("the orphan blob was kept")
	}
	out, err := raw.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: &srv.Bucket, Prefix: &prefix})
	if err != nil || len(out.Uploads) != 0 {
		t.Fatalf("multipart uploads after the pass: %v, %v", out, err)
	}
}
