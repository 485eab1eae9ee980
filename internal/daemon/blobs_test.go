package daemon_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentkernel/agentkernel/internal/blob/s3blob"
	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon"
	"github.com/agentkernel/agentkernel/internal/files"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// s3Config is a daemon configuration on the test S3 server, under a prefix
// of its own.
func s3Config(t *testing.T) (config.Config, s3blob.Options) {
	t.Helper()
	srv := testenv.S3(t)
	var b [6]byte
	rand.Read(b[:])
	cfg := config.Default()
	cfg.Home = t.TempDir()
	cfg.Listen = "127.0.0.1:0"
	cfg.Sandbox.RunDir = filepath.Join(cfg.Home, "run")
	cfg.Blob = config.BlobConfig{Engine: "s3", Endpoint: srv.Endpoint, Bucket: srv.Bucket, Region: srv.Region,
		Prefix: "daemon-" + hex.EncodeToString(b[:]) + "/", AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey,
		PathStyle: true, GCGrace: cfg.Blob.GCGrace, GCInterval: cfg.Blob.GCInterval}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return cfg, s3blob.Options{Endpoint: srv.Endpoint, Region: srv.Region, Bucket: srv.Bucket, Prefix: cfg.Blob.Prefix,
		AccessKeyID: srv.AccessKeyID, SecretAccessKey: srv.SecretAccessKey, PathStyle: true}
}

// TestBlobEngineS3: with [blob] engine = "s3" the daemon keeps its blobs in
// the bucket: a file uploaded through the Files service is an object under
// the prefix, and reads back.
func TestBlobEngineS3(t *testing.T) {
	cfg, opts := s3Config(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d, err := daemon.New(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Listen(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	}()

	f, err := d.Files().Create(ctx, "t1", files.CreateParams{Filename: "notes.txt", Body: strings.NewReader("kept in the bucket")})
	if err != nil {
		t.Fatal(err)
	}
	bucket, err := s3blob.Open(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer bucket.Close()
	defer bucket.Delete(context.Background(), f.BlobKey)
	if info, err := bucket.Stat(ctx, f.BlobKey); err != nil || info.Size != int64(len("kept in the bucket")) {
		t.Fatalf("the file's blob %s in the bucket: %+v, %v", f.BlobKey, info, err)
	}
	rc, _, err := d.Files().Open(ctx, "t1", f.ID)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	if b, err := io.ReadAll(rc); err != nil || string(b) != "kept in the bucket" {
		t.Fatalf("read the file back: %q, %v", b, err)
	}
}

// TestBlobEngineS3MissingBucket: a bucket that does not exist stops the
// daemon at start with an error naming blob.bucket.
func TestBlobEngineS3MissingBucket(t *testing.T) {
	cfg, _ := s3Config(t)
	cfg.Blob.Bucket = "no-such-bucket-" + strings.TrimSuffix(cfg.Blob.Prefix[len("daemon-"):], "/")
	_, err := daemon.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err == nil || !strings.Contains(err.Error(), "blob.bucket") || !strings.Contains(err.Error(), cfg.Blob.Bucket) {
		t.Fatalf("daemon.New with a missing bucket: %v, want an error naming blob.bucket", err)
	}
}
