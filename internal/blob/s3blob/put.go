package s3blob

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"golang.org/x/sync/errgroup"

	"github.com/agentkernel/agentkernel/internal/blob"
)

const contentType = "application/octet-stream"

// Put streams r into key atomically; see blob.Store. A blob that fits in one
// part with its footer is one PutObject; a larger one is a multipart upload
// with up to Concurrency parts in flight, aborted when anything fails, so
// the old blob stays until CompleteMultipartUpload replaces it. Info.ModTime
// is this host's clock at commit; Stat and List report the server's
// Last-Modified.
func (s *Store) Put(ctx context.Context, key string, r io.Reader) (blob.Info, error) {
	if err := blob.ValidateKey(key); err != nil {
		return blob.Info{}, err
	}
	if err := ctx.Err(); err != nil {
		return blob.Info{}, fmt.Errorf("s3blob: put %q: %w", key, err)
	}
	src := &payload{ctx: ctx, r: r, h: sha256.New()}
	bp := s.getBuf()
	n, err := io.ReadFull(src, *bp)
	switch {
	case err == io.EOF || err == io.ErrUnexpectedEOF:
		err = s.putSingle(ctx, key, (*bp)[:n])
		s.putBuf(bp)
	case err != nil:
		s.putBuf(bp)
		err = fmt.Errorf("read after %d bytes: %w", src.n, err)
	default:
		err = s.putMultipart(ctx, key, src, bp)
	}
	if err != nil {
		return blob.Info{}, fmt.Errorf("s3blob: put %q: %w", key, err)
	}
	return blob.Info{Key: key, Size: src.n, SHA256: src.sum, ModTime: time.Now()}, nil
}

// getBuf and putBuf hand out part buffers, counting those held (a test
// checks the bound).
func (s *Store) getBuf() *[]byte {
	n := s.heldBufs.Add(1)
	for p := s.peakBufs.Load(); n > p && !s.peakBufs.CompareAndSwap(p, n); p = s.peakBufs.Load() {
	}
	return s.bufs.Get().(*[]byte)
}

func (s *Store) putBuf(b *[]byte) {
	s.heldBufs.Add(-1)
	s.bufs.Put(b)
}

func (s *Store) putSingle(ctx context.Context, key string, body []byte) error {
	// A cancelled Put must not replace the old blob.
	if err := ctx.Err(); err != nil {
		return err
	}
	_, err := s.client.PutObject(ctx, &s3.PutObjectInput{Bucket: &s.bucket, Key: aws.String(s.objectName(key)),
		Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body))), ContentType: aws.String(contentType)})
	return err
}

// putMultipart uploads first (a full part, which it hands back to the pool)
// and the rest of src as one multipart upload.
func (s *Store) putMultipart(ctx context.Context, key string, src *payload, first *[]byte) error {
	name := s.objectName(key)
	up, err := s.client.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &s.bucket, Key: &name,
		ContentType: aws.String(contentType)})
	if err != nil {
		s.putBuf(first)
		return fmt.Errorf("create multipart upload: %w", err)
	}
	id := aws.ToString(up.UploadId)
	s.uploads.Store(id, struct{}{})
	defer s.uploads.Delete(id)

	parts, err := s.uploadParts(ctx, name, id, src, first)
	if err == nil {
		// A cancelled Put must not replace the old blob.
		err = ctx.Err()
	}
	if err == nil {
		_, err = s.client.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &s.bucket, Key: &name,
			UploadId: &id, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
		if err != nil {
			err = fmt.Errorf("complete multipart upload: %w", err)
		}
	}
	if err != nil {
		// The caller's context may be done; the abort must still run, or the
		// parts stay stored (and billed) until RemoveTemp finds them.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), requestTimeout)
		defer cancel()
		if _, aerr := s.client.AbortMultipartUpload(actx, &s3.AbortMultipartUploadInput{Bucket: &s.bucket, Key: &name,
			UploadId: &id}); aerr != nil && apiCode(aerr) != "NoSuchUpload" {
			s.log.WarnContext(ctx, "s3blob: abort of a failed multipart upload failed; blob GC removes it later",
				"key", key, "upload_id", id, "err", aerr)
		}
		return err
	}
	return nil
}

// uploadParts uploads first and the parts read from src after it, up to
// s.conc at once, and returns them in part order.
func (s *Store) uploadParts(ctx context.Context, name, id string, src *payload, first *[]byte) ([]types.CompletedPart, error) {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(s.conc)
	var (
		mu      sync.Mutex
		parts   []types.CompletedPart
		readErr error
	)
	bp, n, last := first, len(*first), false
	for num := int32(1); ; num++ {
		buf, body := bp, (*bp)[:n]
		g.Go(func() error {
			defer s.putBuf(buf)
			// A part in flight is not cancelled with the Put: a server may
			// finish writing a part whose request the client gave up on,
			// after the abort, and so bring the upload back (S3 says to
			// abort again; versitygw did it in CI). Once every part has
			// ended, one abort is final. A failed Put stops reading parts
			// at once (gctx, and src checks the caller's ctx).
			rctx, cancel := context.WithTimeout(context.WithoutCancel(gctx), requestTimeout)
			defer cancel()
			out, err := s.client.UploadPart(rctx, &s3.UploadPartInput{Bucket: &s.bucket, Key: &name, UploadId: &id,
				PartNumber: aws.Int32(num), Body: bytes.NewReader(body), ContentLength: aws.Int64(int64(len(body)))})
			if err != nil {
				return fmt.Errorf("upload part %d: %w", num, err)
			}
			mu.Lock()
			parts = append(parts, types.CompletedPart{ETag: out.ETag, PartNumber: aws.Int32(num)})
			mu.Unlock()
			return nil
		})
		if last {
			break
		}
		bp = s.getBuf()
		var err error
		n, err = io.ReadFull(src, *bp)
		if err == io.EOF || gctx.Err() != nil {
			// The stream ended with the part before, or an upload failed
			// (g.Wait reports it).
			s.putBuf(bp)
			break
		}
		if err == io.ErrUnexpectedEOF {
			last = true
		} else if err != nil {
			s.putBuf(bp)
			readErr = fmt.Errorf("read after %d bytes: %w", src.n, err)
			break
		}
		if num == maxParts {
			s.putBuf(bp)
			readErr = fmt.Errorf("blob larger than %d parts of %d bytes (raise the part size)", maxParts, s.partSize)
			break
		}
	}
	werr := g.Wait()
	if err := errors.Join(readErr, werr); err != nil {
		return nil, err
	}
	slices.SortFunc(parts, func(a, b types.CompletedPart) int { return int(*a.PartNumber - *b.PartNumber) })
	return parts, nil
}

// payload streams the blob's bytes from r, hashing and counting them, and
// then the footer, which it can only build once r is drained.
type payload struct {
	ctx    context.Context
	r      io.Reader
	h      hash.Hash
	n      int64
	sum    string
	footer []byte // nil until r returned io.EOF
	off    int
}

func (p *payload) Read(b []byte) (int, error) {
	if p.footer == nil {
		if err := p.ctx.Err(); err != nil {
			return 0, err
		}
		n, err := p.r.Read(b)
		p.h.Write(b[:n])
		p.n += int64(n)
		if err != io.EOF {
			return n, err
		}
		sum := p.h.Sum(nil)
		p.sum = hex.EncodeToString(sum)
		p.footer = blob.AppendFooter(make([]byte, 0, blob.FooterLen), p.n, sum)
		if n > 0 {
			return n, nil
		}
	}
	if p.off == len(p.footer) {
		return 0, io.EOF
	}
	k := copy(b, p.footer[p.off:])
	p.off += k
	return k, nil
}
