package fsblob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/blob"
)

// TestConcurrentWritersAndReaders: writers replace one key with distinct
// generations of different sizes while readers read it in a loop. Every read
// must be one complete generation that passes verification; the final blob
// must be one of the generations written.
func TestConcurrentWritersAndReaders(t *testing.T) {
	s := openTest(t, t.TempDir())
	ctx := context.Background()
	const writers, perWriter, readers = 4, 6, 4
	size := func(seed uint64) int64 { return int64(256<<10 + seed*4099) }

	want := map[string]uint64{} // sha256 → seed
	for w := range writers {
		for i := range perWriter {
			seed := uint64(w*100 + i + 1)
			want[genSHA256(seed, size(seed))] = seed
		}
	}

	var wg sync.WaitGroup
	errs := make(chan error, writers+readers)
	done := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for i := range perWriter {
				seed := uint64(w*100 + i + 1)
				if _, err := s.Put(ctx, "shared/key", newGen(seed, size(seed))); err != nil {
					errs <- err
					return
				}
				// Writers to distinct keys in a fresh directory race on
				// creating it.
				if _, err := s.Put(ctx, fmt.Sprintf("fresh%d/w%d", i, w), newGen(seed, 10)); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	var reads sync.WaitGroup
	for range readers {
		reads.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				rc, info, err := s.Get(ctx, "shared/key")
				if errors.Is(err, blob.ErrNotFound) {
					continue
				}
				if err != nil {
					errs <- fmt.Errorf("Get: %w", err)
					return
				}
				n, err := io.Copy(io.Discard, rc)
				rc.Close()
				if err != nil || n != info.Size {
					errs <- fmt.Errorf("read %d of %d bytes: %v", n, info.Size, err)
					return
				}
				if _, ok := want[info.SHA256]; !ok {
					errs <- fmt.Errorf("read a blob (%+v) that no writer wrote", info)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	reads.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	info, err := s.Stat(ctx, "shared/key")
	if _, ok := want[info.SHA256]; err != nil || !ok {
		t.Fatalf("final blob %+v (%v) is not one of the generations written", info, err)
	}
	n := 0
	for _, err := range s.List(ctx, "fresh") {
		if err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n != writers*perWriter {
		t.Fatalf("List(fresh) found %d blobs, want %d", n, writers*perWriter)
	}
}
