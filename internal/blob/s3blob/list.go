package s3blob

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"slices"
	"strings"
	"sync"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// List yields the blobs under prefix in key order; see blob.Store.
//
// It walks one level ("directory") at a time, ListObjectsV2 with delimiter
// "/", and sorts each level as keys sort, as fsblob sorts a directory: the
// server orders object names, and the ".blob" suffix puts "a.blob" after
// "a-b.blob" although key "a" comes before "a-b". Only the levels that can
// hold keys with prefix are listed, and each blob's Info comes from its
// footer (Stat), so Size and SHA256 are what Put recorded.
func (s *Store) List(ctx context.Context, prefix string) iter.Seq2[blob.Info, error] {
	return func(yield func(blob.Info, error) bool) {
		if err := blob.ValidatePrefix(prefix); err != nil {
			yield(blob.Info{}, err)
			return
		}
		dir := ""
		if i := strings.LastIndexByte(prefix, '/'); i >= 0 {
			dir = prefix[:i+1]
		}
		s.walk(ctx, dir, prefix, yield)
	}
}

// entry is a name in a level as it appears in keys: a blob "x" or a
// sub-level "x/". Sorting these sorts keys byte-wise, because every key
// below "x/" starts with "x/" and no other entry's keys do.
type entry struct {
	keyName string
	isDir   bool
}

// listPrefetch is how many footers List reads at once: one request per
// blob, each a round trip, which a blob GC pass over many blobs would
// otherwise wait for one after the other.
const listPrefetch = 16

// walk yields the blobs below dir ("" or ending in "/") whose keys start
// with prefix. It returns false when the consumer stopped.
//
// The footers of a level's blobs are read up to listPrefetch ahead, and
// yielded in key order; the queue is drained before descending into a
// sub-level, so only one level has reads in flight.
func (s *Store) walk(ctx context.Context, dir, prefix string, yield func(blob.Info, error) bool) bool {
	if err := ctx.Err(); err != nil {
		return yield(blob.Info{}, err)
	}
	entries, err := s.readLevel(ctx, dir, prefix)
	if err != nil {
		return yield(blob.Info{}, fmt.Errorf("s3blob: list %q: %w", dir, err))
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel() // the consumer may have stopped: drop the reads ahead
		wg.Wait()
	}()
	type stat struct {
		info blob.Info
		err  error
	}
	var queue []chan stat
	// drain yields the first n queued footers.
	drain := func(n int) bool {
		for _, ch := range queue[:n] {
			r := <-ch
			if errors.Is(r.err, blob.ErrNotFound) {
				continue // deleted since the listing
			}
			if !yield(r.info, r.err) {
				return false
			}
		}
		queue = queue[n:]
		return true
	}
	for _, e := range entries {
		key := dir + e.keyName
		if e.isDir {
			// Descend when keys below may match: the level is inside the
			// prefix, or the prefix continues inside the level.
			if strings.HasPrefix(key, prefix) || strings.HasPrefix(prefix, key) {
				if !drain(len(queue)) || !s.walk(ctx, key, prefix, yield) {
					return false
				}
			}
			continue
		}
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		if len(queue) == listPrefetch && !drain(1) {
			return false
		}
		ch := make(chan stat, 1)
		queue = append(queue, ch)
		wg.Go(func() {
			info, err := s.Stat(ctx, key)
			ch <- stat{info, err}
		})
	}
	return drain(len(queue))
}

// readLevel returns the blobs and sub-levels directly under dir in key
// order. Where prefix goes on past dir the server filters by it too. Names
// no Put creates (no ".blob" suffix, or not a valid key: foreign objects,
// a directory marker) are skipped.
func (s *Store) readLevel(ctx context.Context, dir, prefix string) ([]entry, error) {
	list := dir
	if len(prefix) > len(dir) {
		list = prefix
	}
	base := s.prefix + dir
	p := s3.NewListObjectsV2Paginator(s.client, &s3.ListObjectsV2Input{Bucket: &s.bucket,
		Prefix: aws.String(s.prefix + list), Delimiter: aws.String("/")})
	var out []entry
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, cp := range page.CommonPrefixes {
			seg := strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), base), "/")
			if !strings.Contains(seg, "/") && blob.ValidateKey(dir+seg) == nil {
				out = append(out, entry{keyName: seg + "/", isDir: true})
			}
		}
		for _, o := range page.Contents {
			seg, ok := strings.CutSuffix(strings.TrimPrefix(aws.ToString(o.Key), base), blob.ReservedSuffix)
			if ok && !strings.Contains(seg, "/") && blob.ValidateKey(dir+seg) == nil {
				out = append(out, entry{keyName: seg})
			}
		}
	}
	slices.SortFunc(out, func(a, b entry) int { return strings.Compare(a.keyName, b.keyName) })
	return out, nil
}
