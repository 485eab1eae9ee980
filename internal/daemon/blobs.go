package daemon

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/blob/s3blob"
	"github.com/agentkernel/agentkernel/internal/config"
)

// blobStore is an engine's store as the daemon holds it: a blob.Store it
// closes at shutdown.
type blobStore interface {
	blob.Store
	io.Closer
}

// openBlobs opens the engine [blob] engine names. Both engines implement
// blob.TempRemover, so the blob GC collects what crashed writes left on
// either (temp files, incomplete multipart uploads).
func openBlobs(ctx context.Context, cfg config.Config, log *slog.Logger) (blobStore, error) {
	switch b := cfg.Blob; b.Engine {
	case "fs":
		if err := os.MkdirAll(cfg.BlobPath(), 0o700); err != nil {
			return nil, fmt.Errorf("blob root %s: %w", cfg.BlobPath(), err)
		}
		s, err := fsblob.Open(ctx, cfg.BlobPath(), fsblob.Options{Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open blob store %s: %w", cfg.BlobPath(), err)
		}
		return s, nil
	case "s3":
		s, err := s3blob.Open(ctx, s3blob.Options{Endpoint: b.Endpoint, Region: b.Region, Bucket: b.Bucket, Prefix: b.Prefix,
			AccessKeyID: b.AccessKeyID, SecretAccessKey: b.SecretAccessKey, SessionToken: b.SessionToken,
			PathStyle: b.PathStyle, Logger: log})
		if err != nil {
			return nil, fmt.Errorf("open blob store: %w", err)
		}
		return s, nil
	}
	return nil, fmt.Errorf("blob.engine %q: unknown engine", cfg.Blob.Engine)
}
