package s3blob

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// getAttempts bounds how often Get starts over when the blob is replaced
// between its footer and its bytes.
const getAttempts = 3

// smallBlob: Get asks for this much more than the footer in its first
// request, so a blob this small comes whole in one round trip instead of
// two.
const smallBlob = 64 << 10

// Get opens key; the reader verifies size and sha256 at EOF. The bytes are
// fetched with If-Match on the ETag of the footer Get checked them against:
// a blob replaced in between is read again, never mixed up with the other
// blob's footer.
func (s *Store) Get(ctx context.Context, key string) (io.ReadCloser, blob.Info, error) {
	for attempt := 1; ; attempt++ {
		info, etag, whole, err := s.stat(ctx, key, smallBlob)
		if err != nil {
			return nil, blob.Info{}, err
		}
		if whole != nil {
			return blob.NewVerifyingReader(ctx, io.NopCloser(bytes.NewReader(whole)), info), info, nil
		}
		in := &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.objectName(key)),
			Range: aws.String(fmt.Sprintf("bytes=0-%d", info.Size-1))}
		if etag != "" {
			in.IfMatch = &etag
		}
		out, err := s.client.GetObject(ctx, in)
		if err == nil {
			if n := aws.ToInt64(out.ContentLength); out.ContentLength != nil && n != info.Size {
				out.Body.Close()
				return nil, blob.Info{}, fmt.Errorf("s3blob: get %q: the server answered %d bytes to a range of %d", key, n, info.Size)
			}
			return blob.NewVerifyingReader(ctx, out.Body, info), info, nil
		}
		replaced := apiCode(err) == "PreconditionFailed" || httpStatus(err) == 412
		if (replaced || isMissingObject(err)) && attempt < getAttempts && ctx.Err() == nil {
			continue // replaced or deleted since the footer was read
		}
		if isMissingObject(err) {
			return nil, blob.Info{}, blob.NotFoundError(key)
		}
		return nil, blob.Info{}, fmt.Errorf("s3blob: get %q: %w", key, err)
	}
}

// Stat reads key's footer; see blob.Store.
func (s *Store) Stat(ctx context.Context, key string) (blob.Info, error) {
	info, _, _, err := s.stat(ctx, key, 0)
	return info, err
}

// stat fetches key's footer, and up to more bytes before it, with one
// suffix-range GET, and returns the recorded Info, the object's ETag and,
// when those bytes were the whole blob, the blob. A stored object too short
// for a footer, or whose footer does not match its length, is a
// *blob.CorruptError.
func (s *Store) stat(ctx context.Context, key string, more int64) (blob.Info, string, []byte, error) {
	if err := blob.ValidateKey(key); err != nil {
		return blob.Info{}, "", nil, err
	}
	if err := ctx.Err(); err != nil {
		return blob.Info{}, "", nil, fmt.Errorf("s3blob: stat %q: %w", key, err)
	}
	tail := blob.FooterLen + more
	out, err := s.client.GetObject(ctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: aws.String(s.objectName(key)),
		Range: aws.String(fmt.Sprintf("bytes=-%d", tail))})
	if err != nil {
		switch {
		case isMissingObject(err):
			return blob.Info{}, "", nil, blob.NotFoundError(key)
		case apiCode(err) == "InvalidRange" || httpStatus(err) == 416:
			// No byte to serve: an empty object, which has no footer.
			_, _, err := blob.ParseFooter(key, nil, 0)
			return blob.Info{}, "", nil, err
		}
		return blob.Info{}, "", nil, fmt.Errorf("s3blob: stat %q: %w", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(io.LimitReader(out.Body, tail+1))
	if err != nil {
		return blob.Info{}, "", nil, fmt.Errorf("s3blob: stat %q: read footer: %w", key, err)
	}
	stored, err := objectLength(out)
	if err != nil {
		return blob.Info{}, "", nil, fmt.Errorf("s3blob: stat %q: %w", key, err)
	}
	var footer []byte
	if len(b) >= blob.FooterLen {
		footer = b[len(b)-blob.FooterLen:]
	}
	size, sum, err := blob.ParseFooter(key, footer, stored)
	if err != nil {
		return blob.Info{}, "", nil, err
	}
	var whole []byte
	if int64(len(b)) == stored {
		whole = b[:size]
	}
	info := blob.Info{Key: key, Size: size, SHA256: sum, ModTime: aws.ToTime(out.LastModified)}
	return info, aws.ToString(out.ETag), whole, nil
}

// objectLength is the whole object's length: from Content-Range
// ("bytes 952-999/1000") when the server served the range, from
// Content-Length when it sent the whole (short) object.
func objectLength(out *s3.GetObjectOutput) (int64, error) {
	cr := aws.ToString(out.ContentRange)
	if cr == "" {
		return aws.ToInt64(out.ContentLength), nil
	}
	i := strings.LastIndexByte(cr, '/')
	n, err := strconv.ParseInt(cr[i+1:], 10, 64)
	if i < 0 || err != nil || n < 0 {
		return 0, fmt.Errorf("unreadable Content-Range %q", cr)
	}
	return n, nil
}

// Delete removes key; a missing key is not an error. See blob.Store.
func (s *Store) Delete(ctx context.Context, key string) error {
	if err := blob.ValidateKey(key); err != nil {
		return err
	}
	_, err := s.client.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: aws.String(s.objectName(key))})
	if err != nil && !isMissingObject(err) {
		return fmt.Errorf("s3blob: delete %q: %w", key, err)
	}
	return nil
}
