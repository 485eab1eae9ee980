package object_test

import (
	"bytes"
	"context"
	"io"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/blobgc"
	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/store"
)

// gcAfterPut runs a GC pass right after every Put: the moment the blob
// exists and the row that will hold it does not yet.
type gcAfterPut struct {
	blob.Store
	after func()
}

func (s gcAfterPut) Put(ctx context.Context, key string, r io.Reader) (blob.Info, error) {
	in, err := s.Store.Put(ctx, key, r)
	s.after()
	return in, err
}

// An upload pins its blob from before the Put until its row commits: a GC
// pass without grace that lands in between keeps it, and the next pass
// finds it held by the class's row.
func TestBundleUploadIsPinnedAgainstTheBlobGC(t *testing.T) {
	ctx := context.Background()
	var (
		gc     *blobgc.Collector
		during []blobgc.Report
	)
	e := newEnv(t, func(c *object.Config) {
		blobs, err := fsblob.Open(ctx, t.TempDir(), fsblob.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { blobs.Close() })
		// An hour on: every blob is past the grace, so only a pin or a row
		// can keep it.
		gc, err = blobgc.New(blobgc.Config{Blobs: blobs, Refs: c.Store.(store.BlobRefStore),
			Clock: clock.NewFake(time.Now().Add(time.Hour))})
		if err != nil {
			t.Fatal(err)
		}
		c.Blobs = gcAfterPut{Store: blobs, after: func() { during = append(during, gc.CollectOnce(ctx)) }}
		c.BlobPins = gc
		c.BundleDir = t.TempDir()
	})
	if _, err := e.rt.DefineClass(ctx, "t1", object.ClassDef{Class: "tally", InitCommand: []string{"/app/counter"}}); err != nil {
		t.Fatal(err)
	}
	var tgz bytes.Buffer
	if err := agentkernel.PackBundle(&tgz, e.app); err != nil {
		t.Fatal(err)
	}
	if _, err := e.rt.PutBundle(ctx, "t1", "tally", &tgz); err != nil {
		t.Fatal(err)
	}
	if len(during) != 1 || during[0].Pinned != 1 || during[0].Blobs != 0 {
		t.Fatalf("GC pass between the Put and the row: %+v, want the bundle's blob pinned and kept", during)
	}
	if rep := gc.CollectOnce(ctx); rep.Referenced != 1 || rep.Blobs != 0 {
		t.Fatalf("GC pass after the upload: %+v, want the bundle's blob held by its row", rep)
	}
	if n := e.mustCall(t, key("tally", "a"), "increment", nil); n != 1 {
		t.Fatalf("increment on the bundle: %d", n)
	}
}
