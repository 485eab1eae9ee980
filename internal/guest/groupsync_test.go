package guest

import (
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// waitWaiters blocks until n callers wait on g for the running sync.
func waitWaiters(t *testing.T, g *groupSync, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		g.mu.Lock()
		w := g.waiting
		g.mu.Unlock()
		if w >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers wait for the sync, want %d", w, n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestGroupSyncCoversEveryCaller: every caller returns only after a sync
// that began after its write, and the callers that arrive while one sync
// runs share the next one.
func TestGroupSyncCoversEveryCaller(t *testing.T) {
	var (
		g       groupSync
		mu      sync.Mutex
		written int // writes made
		durable int // writes made before the last sync began
		first   = make(chan struct{})
		once    sync.Once
	)
	const n = 16
	fn := func() error {
		mu.Lock()
		covered := written
		mu.Unlock()
		once.Do(func() { <-first }) // the first sync holds until the rest wait
		mu.Lock()
		durable = max(durable, covered)
		mu.Unlock()
		return nil
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	call := func() {
		defer wg.Done()
		mu.Lock()
		written++
		mine := written
		mu.Unlock()
		if err := g.sync(fn); err != nil {
			errs <- err
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if durable < mine {
			errs <- errors.New("a caller returned before a sync covered its write")
		}
	}
	wg.Add(1)
	go call()
	// The first caller's sync runs; the others arrive during it.
	for {
		g.mu.Lock()
		running := g.running
		g.mu.Unlock()
		if running {
			break
		}
		time.Sleep(time.Millisecond)
	}
	wg.Add(n - 1)
	for range n - 1 {
		go call()
	}
	waitWaiters(t, &g, n-1)
	close(first)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if g.syncs != 2 {
		t.Fatalf("%d callers ran %d syncs, want 2 (theirs and one shared by the rest)", n, g.syncs)
	}
}

// TestGroupSyncError: the callers a failed sync covered get its error.
func TestGroupSyncError(t *testing.T) {
	var g groupSync
	boom := errors.New("fsync failed")
	if err := g.sync(func() error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("sync = %v, want %v", err, boom)
	}
	if err := g.sync(func() error { return nil }); err != nil {
		t.Fatalf("sync after a failed one = %v", err)
	}
}

// TestAcceptsShareOneFsync: concurrent acceptances are made durable by a
// shared fsync of ops/, each returning only after it; an acceptance whose
// fsync fails is not accepted (its record is gone, so it never ran).
func TestAcceptsShareOneFsync(t *testing.T) {
	dir := t.TempDir()
	// A guest that cannot read the boot id: every acceptance is fsynced.
	ops := newOpTableOnBoot(t, dir, "")
	real := ops.syncOps
	first := make(chan struct{})
	var once sync.Once
	ops.syncOps = func() error {
		once.Do(func() { <-first })
		return real()
	}
	const n = 8
	var wg sync.WaitGroup
	errs := make(chan error, n)
	accept := func(i int) {
		defer wg.Done()
		errs <- ops.accept(testOpID(i), &command{argv: []string{"true"}, dir: dir})
	}
	wg.Add(1)
	go accept(0)
	for {
		ops.acceptSync.mu.Lock()
		running := ops.acceptSync.running
		ops.acceptSync.mu.Unlock()
		if running {
			break
		}
		time.Sleep(time.Millisecond)
	}
	wg.Add(n - 1)
	for i := 1; i < n; i++ {
		go accept(i)
	}
	waitWaiters(t, &ops.acceptSync, n-1)
	close(first)
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if got := ops.acceptSync.syncs; got != 2 {
		t.Fatalf("%d acceptances ran %d fsyncs of ops/, want 2", n, got)
	}
	for i := range n {
		st, _, err := ops.status(testOpID(i))
		if err != nil || st.State != OpStateRunning {
			t.Fatalf("op %d: %+v, %v; want running", i, st, err)
		}
	}

	boom := errors.New("fsync failed")
	ops.syncOps = func() error { return boom }
	if err := ops.accept(testOpID(100), &command{argv: []string{"true"}, dir: dir}); !errors.Is(err, boom) {
		t.Fatalf("accept with a failing fsync = %v, want %v", err, boom)
	}
	if st, _, err := ops.status(testOpID(100)); err != nil || st.State != OpStateUnknown {
		t.Fatalf("op after a failed acceptance: %+v, %v; want unknown", st, err)
	}
	if _, err := os.Stat(filepath.Join(dir, opsDir, testOpID(100))); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("record of a failed acceptance: %v, want gone", err)
	}
}
