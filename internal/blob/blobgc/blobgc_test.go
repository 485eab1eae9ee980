package blobgc_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/blob/blobgc"
	"github.com/agentkernel/agentkernel/internal/blob/fsblob"
	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

type env struct {
	t     *testing.T
	ctx   context.Context
	dir   string
	blobs *fsblob.Store
	st    store.Store
	clock *clock.Fake
	reg   *prometheus.Registry
}

func newEnv(t *testing.T) *env {
	t.Helper()
	ctx := context.Background()
	home := t.TempDir()
	dir := filepath.Join(home, "blobs")
	blobs, err := fsblob.Open(ctx, dir, fsblob.Options{SweepOlderThan: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { blobs.Close() })
	st, err := sqlite.Open(ctx, filepath.Join(home, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return &env{t: t, ctx: ctx, dir: dir, blobs: blobs, st: st, clock: clock.NewFake(time.Now()), reg: prometheus.NewRegistry()}
}

func (e *env) collector(grace time.Duration, refs store.BlobRefStore) *blobgc.Collector {
	e.t.Helper()
	if refs == nil {
		refs = e.st
	}
	c, err := blobgc.New(blobgc.Config{Blobs: e.blobs, Refs: refs, Grace: grace, Clock: e.clock, Registry: e.reg})
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// put writes a blob of n bytes whose file was last written age ago.
func (e *env) put(key string, n int, age time.Duration) {
	e.t.Helper()
	if _, err := e.blobs.Put(e.ctx, key, strings.NewReader(strings.Repeat("x", n))); err != nil {
		e.t.Fatal(err)
	}
	e.age(filepath.Join(e.dir, key+blob.ReservedSuffix), age)
}

func (e *env) age(path string, age time.Duration) {
	e.t.Helper()
	at := e.clock.Now().Add(-age)
	if err := os.Chtimes(path, at, at); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) backupRow(id, key string) {
	e.t.Helper()
	now := time.Now()
	if _, err := e.st.CreateBackup(e.ctx, &store.Backup{ID: id, SandboxID: "sbx_1", BlobKey: key,
		CreatedAt: now, ExpiresAt: now.Add(time.Hour)}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) exists(key string) bool {
	e.t.Helper()
	_, err := e.blobs.Stat(e.ctx, key)
	if err != nil && !errors.Is(err, blob.ErrNotFound) {
		e.t.Fatal(err)
	}
	return err == nil
}

// TestCollectsExactlyWhatNoRowHolds: old blobs no row holds and old temp
// files are deleted; blobs a backup or a transcript holds, and anything
// younger than the grace period, stay.
func TestCollectsExactlyWhatNoRowHolds(t *testing.T) {
	e := newEnv(t)
	const grace = time.Hour
	old := 2 * grace
	e.put("backups/t/s/kept.tar.zst", 10, old)
	e.backupRow("bkp_kept", "backups/t/s/kept.tar.zst")
	e.put("transcripts/tsk_1", 20, old)
	if _, err := e.st.SaveTranscript(e.ctx, &store.Transcript{TaskID: "tsk_1", BlobKey: "transcripts/tsk_1"}); err != nil {
		t.Fatal(err)
	}
	e.put("backups/t/s/orphan1.tar.zst", 300, old)
	e.put("backups/t/s/orphan2.tar.zst", 4000, old)
	e.put("backups/t/s/young.tar.zst", 50, grace/2)
	staleTemp := filepath.Join(e.dir, "backups", "t", "s", ".tmp-dead")
	youngTemp := filepath.Join(e.dir, "backups", "t", ".tmp-alive")
	os.WriteFile(staleTemp, make([]byte, 777), 0o644)
	os.WriteFile(youngTemp, make([]byte, 5), 0o644)
	e.age(staleTemp, old)
	e.age(youngTemp, grace/2)

	rep := e.collector(grace, nil).CollectOnce(e.ctx)
	if rep.Err != nil {
		t.Fatal(rep.Err)
	}
	want := blobgc.Report{Scanned: 5, Young: 1, Referenced: 2, Blobs: 2, BlobBytes: 4300, TempFiles: 1, TempBytes: 777}
	if rep != want {
		t.Fatalf("report %+v, want %+v", rep, want)
	}
	for key, want := range map[string]bool{
		"backups/t/s/kept.tar.zst": true, "transcripts/tsk_1": true, "backups/t/s/young.tar.zst": true,
		"backups/t/s/orphan1.tar.zst": false, "backups/t/s/orphan2.tar.zst": false,
	} {
		if got := e.exists(key); got != want {
			t.Errorf("%s exists = %v after the pass, want %v", key, got, want)
		}
	}
	if _, err := os.Stat(staleTemp); !os.IsNotExist(err) {
		t.Errorf("stale temp file: %v", err)
	}
	if _, err := os.Stat(youngTemp); err != nil {
		t.Errorf("young temp file removed: %v", err)
	}
	for _, m := range []struct {
		name, kind string
		want       float64
	}{
		{"agentkernel_blob_gc_deleted_total", "blob", 2},
		{"agentkernel_blob_gc_deleted_bytes_total", "blob", 4300},
		{"agentkernel_blob_gc_deleted_total", "temp", 1},
		{"agentkernel_blob_gc_deleted_bytes_total", "temp", 777},
		{"agentkernel_blob_gc_runs_total", "", 1},
	} {
		if got := metric(t, e.reg, m.name, m.kind); got != m.want {
			t.Errorf("%s{kind=%q} = %v, want %v", m.name, m.kind, got, m.want)
		}
	}
}

// TestPinnedWriteIsNeverCollected: with no grace at all, a blob written
// and not yet referenced by its row survives every pass while its writer
// holds the pin, and stays once the row is committed. The same blob
// without a pin is deleted: the pin is what protects it.
func TestPinnedWriteIsNeverCollected(t *testing.T) {
	e := newEnv(t)
	gc := e.collector(0, nil)
	unpin := gc.Pin("backups/t/s/inflight.tar.zst")
	e.put("backups/t/s/inflight.tar.zst", 10, time.Hour)
	e.put("backups/t/s/unpinned.tar.zst", 10, time.Hour)

	rep := gc.CollectOnce(e.ctx)
	if rep.Pinned != 1 || rep.Blobs != 1 {
		t.Fatalf("report %+v: want the pinned blob kept and the unpinned one deleted", rep)
	}
	if !e.exists("backups/t/s/inflight.tar.zst") || e.exists("backups/t/s/unpinned.tar.zst") {
		t.Fatal("a pinned blob was deleted, or an unpinned orphan kept")
	}
	e.backupRow("bkp_inflight", "backups/t/s/inflight.tar.zst")
	unpin()
	unpin() // idempotent
	rep = gc.CollectOnce(e.ctx)
	if rep.Referenced != 1 || rep.Blobs != 0 || !e.exists("backups/t/s/inflight.tar.zst") {
		t.Fatalf("after its row was committed: %+v, exists=%v", rep, e.exists("backups/t/s/inflight.tar.zst"))
	}
}

type failingRefs struct{}

func (failingRefs) ReferencedBlobKeys(context.Context, []string) (map[string]bool, error) {
	return nil, errors.New("store unavailable")
}

// TestFailedLookupDeletesNothing: when the store cannot say what is
// referenced, nothing is deleted and the pass reports the error.
func TestFailedLookupDeletesNothing(t *testing.T) {
	e := newEnv(t)
	e.put("backups/t/s/a.tar.zst", 10, 2*time.Hour)
	rep := e.collector(time.Hour, failingRefs{}).CollectOnce(e.ctx)
	if rep.Err == nil || rep.Blobs != 0 || !e.exists("backups/t/s/a.tar.zst") {
		t.Fatalf("report %+v, exists=%v: want an error and the blob kept", rep, e.exists("backups/t/s/a.tar.zst"))
	}
	if got := metric(t, e.reg, "agentkernel_blob_gc_errors_total", ""); got != 1 {
		t.Fatalf("errors_total = %v", got)
	}
}

// TestLoopCollectsAtStartAndEveryInterval: the first pass runs at Start
// (what the last crash left goes at once), the next after Interval.
func TestLoopCollectsAtStartAndEveryInterval(t *testing.T) {
	e := newEnv(t)
	collected := make(chan blobgc.Report)
	gc, err := blobgc.New(blobgc.Config{Blobs: e.blobs, Refs: e.st, Grace: time.Hour, Interval: 10 * time.Minute,
		Clock: e.clock, Registry: e.reg, Collected: collected})
	if err != nil {
		t.Fatal(err)
	}
	e.put("backups/t/s/first.tar.zst", 10, 2*time.Hour)
	if err := gc.Start(e.ctx); err != nil {
		t.Fatal(err)
	}
	defer gc.Stop()
	if rep := <-collected; rep.Blobs != 1 {
		t.Fatalf("first pass: %+v", rep)
	}
	e.put("backups/t/s/second.tar.zst", 10, 2*time.Hour)
	e.clock.BlockUntilWaiting(1)
	e.clock.Advance(10 * time.Minute)
	if rep := <-collected; rep.Blobs != 1 || e.exists("backups/t/s/second.tar.zst") {
		t.Fatalf("second pass: %+v", rep)
	}
	gc.Stop()
	gc.Stop()
}

// metric reads a counter from reg; kind "" for counters without labels.
func metric(t *testing.T, reg *prometheus.Registry, name, kind string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if kind == "" || (len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == kind) {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("no metric %s{kind=%q}", name, kind)
	return 0
}

// delegate records its calls and deletes nothing.
type delegate struct {
	prefix string
	calls  int
	grace  time.Duration
}

func (d *delegate) Prefix() string { return d.prefix }
func (d *delegate) Collect(_ context.Context, grace time.Duration, _ time.Time) error {
	d.calls++
	d.grace = grace
	return nil
}

// TestDelegatedPrefixIsLeftToItsCollector: blobs under a delegate's
// prefix are not the generic pass's (no row holds them: other blobs do);
// the delegate runs once per pass with the collector's grace.
func TestDelegatedPrefixIsLeftToItsCollector(t *testing.T) {
	e := newEnv(t)
	e.put("wsnap/c/ab/abcd", 10, 2*time.Hour)
	e.put("loose/x", 10, 2*time.Hour)
	d := &delegate{prefix: "wsnap/"}
	gc, err := blobgc.New(blobgc.Config{Blobs: e.blobs, Refs: e.st, Grace: time.Hour, Clock: e.clock,
		Registry: e.reg, Delegates: []blobgc.Delegate{d}})
	if err != nil {
		t.Fatal(err)
	}
	rep := gc.CollectOnce(e.ctx)
	if rep.Err != nil || rep.Blobs != 1 || rep.Scanned != 1 {
		t.Fatalf("pass: %+v; want the loose blob alone scanned and collected", rep)
	}
	if !e.exists("wsnap/c/ab/abcd") || e.exists("loose/x") {
		t.Fatal("the delegated blob was collected, or the loose one kept")
	}
	if d.calls != 1 || d.grace != time.Hour {
		t.Fatalf("delegate called %d times with grace %v", d.calls, d.grace)
	}
}
