package agentkernel_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
)

// TestFilesExpiredAreReaped: a file uploaded with expires_in_seconds is
// deleted, row and bytes, by the daemon's reaper once it expired; a file
// without an expiry stays. The test runs a reaper pass at the file's
// expiry (the hook a real clock reaches an hour later).
func TestFilesExpiredAreReaped(t *testing.T) {
	fileEngines(t, func(t *testing.T, engine daemontest.Option) {
		ctx := context.Background()
		d := daemontest.Start(t, engine)
		tenantID, key := fileTenant(t, d, "files-reap")
		c := sdkClient(d, key)
		exp, err := c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader("short-lived"), "e.txt", "text/plain"),
			ExpiresInSeconds: anthropic.Int(3600)})
		if err != nil {
			t.Fatal(err)
		}
		keep, err := c.Beta.Files.Upload(ctx, anthropic.BetaFileUploadParams{File: anthropic.File(strings.NewReader("kept"), "k.txt", "text/plain")})
		if err != nil {
			t.Fatal(err)
		}
		row, err := d.Store().GetFile(ctx, tenantID, exp.ID)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Blobs().Stat(ctx, row.BlobKey); err != nil {
			t.Fatalf("the blob of a fresh upload: %v", err)
		}

		if n, err := d.FileReaper().ReapOnce(ctx, exp.CreatedAt); err != nil || n != 0 {
			t.Fatalf("a pass before the expiry reaped %d, %v", n, err)
		}
		if n, err := d.FileReaper().ReapOnce(ctx, exp.ExpiresAt); err != nil || n != 1 {
			t.Fatalf("the pass at the expiry reaped %d, %v; want the expiring file", n, err)
		}
		if _, err := d.Blobs().Stat(ctx, row.BlobKey); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("the expired file's blob after the reaper: %v; want it deleted", err)
		}
		if _, err := d.Store().GetFile(ctx, tenantID, exp.ID); err == nil {
			t.Fatal("the expired file's row is still there after the reaper")
		}
		_, err = c.Beta.Files.GetMetadata(ctx, exp.ID, anthropic.BetaFileGetMetadataParams{})
		wantStatus(t, "metadata of a reaped file", err, 404)
		if m, err := c.Beta.Files.GetMetadata(ctx, keep.ID, anthropic.BetaFileGetMetadataParams{}); err != nil || m.ID != keep.ID {
			t.Fatalf("a file without an expiry after the reaper: %v %v", m, err)
		}
	})
}
