package files

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/store"
)

// ReaperConfig configures a Reaper.
type ReaperConfig struct {
	// Interval between passes (default one minute).
	Interval time.Duration
	// Batch is how many expired files one listing takes (default 100).
	Batch int
	// Clock drives the passes and says what has expired (default real).
	Clock clock.Clock
	// Reaped, when set, receives each pass's count (tests await a pass).
	Reaped chan<- int
}

// Reaper deletes expired files: an expired file already answers 404
// (Service.Get), and the reaper reclaims its row and bytes. A daemon
// Service: Start runs a pass every Interval, Stop waits for it.
type Reaper struct {
	s   *Service
	cfg ReaperConfig
	log *slog.Logger

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewReaper returns a reaper of s's expired files.
func (s *Service) NewReaper(c ReaperConfig) *Reaper {
	if c.Interval <= 0 {
		c.Interval = time.Minute
	}
	if c.Batch <= 0 {
		c.Batch = 100
	}
	if c.Clock == nil {
		c.Clock = clock.Real{}
	}
	return &Reaper{s: s, cfg: c, log: s.log}
}

// Start begins reaping every Interval; it returns at once.
func (r *Reaper) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return nil
	}
	ctx, r.cancel = context.WithCancel(context.WithoutCancel(ctx))
	r.done = make(chan struct{})
	go r.loop(ctx, r.done)
	return nil
}

// Stop stops the loop and waits for it; calling it twice is fine.
func (r *Reaper) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel = nil
	r.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (r *Reaper) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-r.cfg.Clock.After(r.cfg.Interval):
		}
		n, err := r.ReapOnce(ctx, r.cfg.Clock.Now())
		if err != nil && ctx.Err() == nil {
			r.log.Warn("reap expired files; the next pass retries", "reaped", n, "err", err)
		}
		if r.cfg.Reaped != nil {
			select {
			case r.cfg.Reaped <- n:
			case <-ctx.Done():
				return
			}
		}
	}
}

// ReapOnce deletes every file expired at now, a batch at a time: each
// file's row first (from then on it is gone, as for Service.Delete), then
// its bytes; a failed blob delete is left to the blob GC (no row names the
// blob any more). It returns how many files it deleted.
func (r *Reaper) ReapOnce(ctx context.Context, now time.Time) (int, error) {
	n := 0
	for {
		batch, err := r.s.st.ListExpiredFiles(ctx, now, r.cfg.Batch)
		if err != nil {
			return n, err
		}
		for _, f := range batch {
			del, err := r.s.st.DeleteFile(ctx, f.TenantID, f.ID)
			if errors.Is(err, store.ErrNotFound) {
				continue // deleted through the API meanwhile
			}
			if err != nil {
				return n, err
			}
			r.s.deleteBlob(del.BlobKey)
			n++
		}
		if len(batch) < r.cfg.Batch {
			return n, nil
		}
	}
}
