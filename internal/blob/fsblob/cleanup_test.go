package fsblob

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRemoveTempSparesPutsInFlight: a cutoff later than a running Put's
// temp file (a short GC grace) must not cut that Put short; a temp file
// that no Put of this process writes is removed once it is older than the
// cutoff, and its bytes are reported.
func TestRemoveTempSparesPutsInFlight(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s := openTest(t, dir)

	// A Put that stops after its first chunk reached the temp file.
	chunkWritten := make(chan struct{})
	release := make(chan struct{})
	g := newGen(1, 3<<20)
	g.onRead = func(served int64) {
		if served > 0 && served < 2<<20 {
			select {
			case <-chunkWritten:
			default:
				close(chunkWritten)
				<-release
			}
		}
	}
	putErr := make(chan error, 1)
	go func() {
		_, err := s.Put(ctx, "backups/a", g)
		putErr <- err
	}()
	<-chunkWritten

	// A temp file left by a writer that died: not this process's.
	stale := filepath.Join(dir, "backups", tempPrefix+"deadbeef")
	if err := os.WriteFile(stale, make([]byte, 1234), 0o644); err != nil {
		t.Fatal(err)
	}

	rep, err := s.RemoveTemp(ctx, time.Now().Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	if rep.Files != 1 || rep.Bytes != 1234 {
		t.Fatalf("removed %+v, want exactly the stale temp file (1 file, 1234 bytes)", rep)
	}
	if _, err := os.Stat(stale); !os.IsNotExist(err) {
		t.Fatalf("stale temp file still there: %v", err)
	}
	close(release)
	if err := <-putErr; err != nil {
		t.Fatalf("the Put in flight failed after RemoveTemp: %v", err)
	}
	if _, err := s.Stat(ctx, "backups/a"); err != nil {
		t.Fatal(err)
	}
}
