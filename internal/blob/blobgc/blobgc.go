// Package blobgc deletes what no durable row points at: blobs whose key no
// row holds (store.BlobKeyColumns) and temp files of writes that never
// finished. Crashes leave both: a daemon killed between writing a blob and
// inserting the row that references it leaves the blob, one killed during
// the write leaves the temp file, and one killed between deleting a row and
// deleting its blob (the backup reaper) leaves the blob again.
//
// Nothing that a write in flight is about to reference is deleted. Writers
// of this process pin the key (blob.Pinner) from before their Put until the
// row is committed, and the engine knows its own Puts in flight
// (blob.TempRemover). Writers of other processes sharing the blob store
// are covered by the grace period alone: a blob or temp file is collected
// only once it is older than Grace, so Grace must exceed the longest time
// such a writer takes from the start of its Put to its row's commit.
package blobgc

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentkernel/agentkernel/internal/blob"
	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/store"
)

// Defaults of the collector ([blob] gc_grace, gc_interval).
const (
	DefaultGrace    = time.Hour
	DefaultInterval = time.Hour
)

// Config configures a Collector.
type Config struct {
	Blobs blob.Store
	Refs  store.BlobRefStore
	// Grace is how old a blob or temp file must be before it can be
	// collected (used as given: 0 collects at once what is not pinned).
	Grace time.Duration
	// Interval between passes after the first, which runs at Start
	// (default DefaultInterval).
	Interval time.Duration

	// Delegates collect the blobs under their own prefixes (blobs that
	// other blobs reference, which no row knows): the generic pass leaves
	// those prefixes alone and calls each delegate once per pass.
	Delegates []Delegate

	Clock    clock.Clock
	Log      *slog.Logger
	Registry prometheus.Registerer
	// Collected, when set, receives the report of every pass the loop runs
	// (a test signal).
	Collected chan<- Report
}

// Delegate collects the blobs under Prefix, with the collector's grace
// period and clock.
type Delegate interface {
	Prefix() string
	Collect(ctx context.Context, grace time.Duration, now time.Time) error
}

// Report says what one pass did.
type Report struct {
	Scanned    int   // blobs listed
	Young      int   // younger than the grace period: kept
	Pinned     int   // pinned by a write in flight: kept
	Referenced int   // held by a row: kept
	Blobs      int   // unreferenced blobs deleted
	BlobBytes  int64 // their size
	TempFiles  int   // temp files of dead writes removed
	TempBytes  int64 // their size
	Err        error // the first error; the pass goes on after errors
}

// Collector is the blob garbage collector. It implements blob.Pinner for
// the writers that share its blob store.
type Collector struct {
	cfg     Config
	log     *slog.Logger
	clock   clock.Clock
	pins    *pins
	metrics *metrics

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

var _ blob.Pinner = (*Collector)(nil)

// New returns a stopped collector.
func New(cfg Config) (*Collector, error) {
	if cfg.Blobs == nil || cfg.Refs == nil {
		return nil, errors.New("blobgc: Blobs and Refs are required")
	}
	if cfg.Grace < 0 {
		return nil, fmt.Errorf("blobgc: grace %s is negative", cfg.Grace)
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	if cfg.Registry == nil {
		cfg.Registry = prometheus.NewRegistry()
	}
	m, err := newMetrics(cfg.Registry)
	if err != nil {
		return nil, err
	}
	return &Collector{cfg: cfg, log: cfg.Log, clock: cfg.Clock, pins: newPins(), metrics: m}, nil
}

// Pin implements blob.Pinner.
func (c *Collector) Pin(key string) func() { return c.pins.Pin(key) }

// Start runs a pass at once (what the last crash left is collected at
// start) and then every Interval; it returns at once.
func (c *Collector) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.cancel != nil {
		return nil
	}
	ctx, c.cancel = context.WithCancel(context.WithoutCancel(ctx))
	c.done = make(chan struct{})
	go c.loop(ctx, c.done)
	return nil
}

// Stop stops the loop and waits for it; idempotent.
func (c *Collector) Stop() {
	c.mu.Lock()
	cancel, done := c.cancel, c.done
	c.cancel = nil
	c.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (c *Collector) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		rep := c.CollectOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		if c.cfg.Collected != nil {
			select {
			case c.cfg.Collected <- rep:
			case <-ctx.Done():
				return
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(c.cfg.Interval):
		}
	}
}

// delegated: a delegate collects key.
func (c *Collector) delegated(key string) bool {
	for _, d := range c.cfg.Delegates {
		if strings.HasPrefix(key, d.Prefix()) {
			return true
		}
	}
	return false
}

// CollectOnce runs one pass now.
func (c *Collector) CollectOnce(ctx context.Context) Report {
	var rep Report
	fail := func(err error) {
		c.metrics.errors.Inc()
		if rep.Err == nil {
			rep.Err = err
		}
		c.log.WarnContext(ctx, "blob gc", "err", err)
	}
	cutoff := c.clock.Now().Add(-c.cfg.Grace)
	var batch []blob.Info
	for info, err := range c.cfg.Blobs.List(ctx, "") {
		if err != nil {
			if ctx.Err() != nil {
				break
			}
			fail(fmt.Errorf("list blobs: %w", err))
			continue
		}
		if c.delegated(info.Key) {
			continue
		}
		rep.Scanned++
		if !info.ModTime.Before(cutoff) {
			rep.Young++
			continue
		}
		if batch = append(batch, info); len(batch) == store.BlobRefBatch {
			c.collect(ctx, batch, &rep, fail)
			batch = batch[:0]
		}
	}
	if len(batch) > 0 {
		c.collect(ctx, batch, &rep, fail)
	}
	for _, d := range c.cfg.Delegates {
		if ctx.Err() != nil {
			break
		}
		if err := d.Collect(ctx, c.cfg.Grace, c.clock.Now()); err != nil {
			fail(fmt.Errorf("collect %s: %w", d.Prefix(), err))
		}
	}
	if tr, ok := c.cfg.Blobs.(blob.TempRemover); ok && ctx.Err() == nil {
		t, err := tr.RemoveTemp(ctx, cutoff)
		if err != nil {
			fail(err)
		}
		rep.TempFiles, rep.TempBytes = t.Files, t.Bytes
		c.metrics.deleted.WithLabelValues("temp").Add(float64(t.Files))
		c.metrics.deletedBytes.WithLabelValues("temp").Add(float64(t.Bytes))
	}
	c.metrics.runs.Inc()
	if rep.Blobs > 0 || rep.TempFiles > 0 {
		c.log.InfoContext(ctx, "blob gc collected", "blobs", rep.Blobs, "blob_bytes", rep.BlobBytes,
			"temp_files", rep.TempFiles, "temp_bytes", rep.TempBytes, "scanned", rep.Scanned)
	}
	return rep
}

// collect deletes the blobs of batch that no row references. The keys are
// claimed first, so a Pin of one of them waits until the decision is made
// and carried out, and a key pinned before the claim is left alone: the
// referencing row of a pinned write may not be committed yet.
func (c *Collector) collect(ctx context.Context, batch []blob.Info, rep *Report, fail func(error)) {
	size := make(map[string]int64, len(batch))
	keys := make([]string, 0, len(batch))
	for _, in := range batch {
		size[in.Key] = in.Size
		keys = append(keys, in.Key)
	}
	claimed, pinned := c.pins.claim(keys)
	defer c.pins.release(claimed)
	rep.Pinned += pinned
	if len(claimed) == 0 {
		return
	}
	refd, err := c.cfg.Refs.ReferencedBlobKeys(ctx, claimed)
	if err != nil {
		fail(fmt.Errorf("referenced blob keys: %w", err))
		return // deleting on a failed lookup would delete live blobs
	}
	for _, k := range claimed {
		if refd[k] {
			rep.Referenced++
			continue
		}
		if err := c.cfg.Blobs.Delete(ctx, k); err != nil {
			fail(fmt.Errorf("delete unreferenced blob %q: %w", k, err))
			continue
		}
		rep.Blobs++
		rep.BlobBytes += size[k]
		c.metrics.deleted.WithLabelValues("blob").Inc()
		c.metrics.deletedBytes.WithLabelValues("blob").Add(float64(size[k]))
	}
}
