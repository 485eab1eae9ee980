package s3blob

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// RemoveTemp aborts the incomplete multipart uploads of blobs under the
// prefix started before cutoff — those of writers that died mid-Put —
// except this process's Puts still running. Their parts are stored (and
// billed) but belong to no object until aborted. Files counts the uploads,
// Bytes their parts. See blob.TempRemover.
func (s *Store) RemoveTemp(ctx context.Context, cutoff time.Time) (blob.TempReport, error) {
	var rep blob.TempReport
	in := &s3.ListMultipartUploadsInput{Bucket: &s.bucket, Prefix: &s.prefix}
	for {
		page, err := s.client.ListMultipartUploads(ctx, in)
		if err != nil {
			return rep, fmt.Errorf("s3blob: list multipart uploads: %w", err)
		}
		for _, u := range page.Uploads {
			key, id := aws.ToString(u.Key), aws.ToString(u.UploadId)
			if !strings.HasSuffix(key, blob.ReservedSuffix) || u.Initiated == nil || !u.Initiated.Before(cutoff) {
				continue
			}
			if _, mine := s.uploads.Load(id); mine {
				continue
			}
			n, err := s.partBytes(ctx, key, id)
			if err != nil {
				return rep, err
			}
			if _, err := s.client.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket,
				Key: &key, UploadId: &id}); err != nil {
				if apiCode(err) == "NoSuchUpload" {
					continue // completed or aborted since the listing
				}
				return rep, fmt.Errorf("s3blob: abort multipart upload of %q: %w", key, err)
			}
			rep.Files++
			rep.Bytes += n
		}
		if !aws.ToBool(page.IsTruncated) {
			return rep, nil
		}
		in.KeyMarker, in.UploadIdMarker = page.NextKeyMarker, page.NextUploadIdMarker
	}
}

// partBytes adds up the sizes of an upload's parts.
func (s *Store) partBytes(ctx context.Context, key, id string) (int64, error) {
	var n int64
	p := s3.NewListPartsPaginator(s.client, &s3.ListPartsInput{Bucket: &s.bucket, Key: &key, UploadId: &id})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if apiCode(err) == "NoSuchUpload" {
			return n, nil
		}
		if err != nil {
			return 0, fmt.Errorf("s3blob: list parts of %q: %w", key, err)
		}
		for _, part := range page.Parts {
			n += aws.ToInt64(part.Size)
		}
	}
	return n, nil
}
