package files_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/files"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// TestReaperDeletesExpiredFiles: on a fake clock, each pass deletes the
// rows and blobs of the files expired by then (in batches smaller than
// what expired), and leaves the rest alone.
func TestReaperDeletesExpiredFiles(t *testing.T) {
	ctx := context.Background()
	st, err := sqlite.Open(ctx, t.TempDir()+"/state.db")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	blobs, err := fsblob.Open(ctx, t.TempDir(), fsblob.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC))
	svc := files.New(files.Config{Store: st, Blobs: blobs, Now: fake.Now})
	put := func(tenant string, ttl time.Duration) *store.File {
		t.Helper()
		sf, err := svc.Stage(ctx, tenant, files.CreateParams{Filename: "a.txt", Body: strings.NewReader("bytes")})
		if err != nil {
			t.Fatal(err)
		}
		f, err := sf.Commit(ctx, ttl)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	hour1, hour1b, hour2, never := put("t1", time.Hour), put("t2", time.Hour), put("t1", 2*time.Hour), put("t1", 0)

	reaped := make(chan int)
	r := svc.NewReaper(files.ReaperConfig{Interval: time.Minute, Batch: 1, Clock: fake, Reaped: reaped})
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	pass := func(d time.Duration) int {
		t.Helper()
		fake.BlockUntilWaiting(1)
		fake.Advance(d)
		return <-reaped
	}
	gone := func(f *store.File) bool {
		t.Helper()
		_, rowErr := st.GetFile(ctx, f.TenantID, f.ID)
		_, blobErr := blobs.Stat(ctx, f.BlobKey)
		if errors.Is(rowErr, store.ErrNotFound) != errors.Is(blobErr, blob.ErrNotFound) {
			t.Fatalf("file %s: row %v, blob %v; want both there or both gone", f.ID, rowErr, blobErr)
		}
		return errors.Is(rowErr, store.ErrNotFound)
	}

	if n := pass(time.Minute); n != 0 || gone(hour1) || gone(never) {
		t.Fatalf("a pass before anything expired reaped %d", n)
	}
	if n := pass(time.Hour); n != 2 || !gone(hour1) || !gone(hour1b) || gone(hour2) || gone(never) {
		t.Fatalf("the pass after one hour reaped %d; want the two files of both tenants that expired then, in batches of 1", n)
	}
	if n := pass(time.Hour); n != 1 || !gone(hour2) || gone(never) {
		t.Fatalf("the pass after two hours reaped %d; want the two-hour file", n)
	}
	if n := pass(1000 * time.Hour); n != 0 || gone(never) {
		t.Fatalf("a file without an expiry was reaped (%d)", n)
	}
}
