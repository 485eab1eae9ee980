// Package session runs agent sessions on the store's session primitives.
// This file holds the garbage collector for expired sessions and orphaned
// staging (seed 004: expiresAt is an operator GC hint; staged changes whose
// step never promoted them are orphans).
package session

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/store"
)

// SweeperConfig tunes the Sweeper.
type SweeperConfig struct {
	Interval time.Duration // how often to sweep; default 1m
	// StagingTTL is how old staged changes must be before they count as
	// orphaned; default 1h.
	StagingTTL time.Duration
	Clock      clock.Clock
	Log        *slog.Logger
	// Swept, when set, receives the result of every sweep (a test signal).
	Swept chan<- SweepResult
}

// SweepResult reports one sweep.
type SweepResult struct {
	ExpiredSessions int
	OrphanedStaging int
	Err             error
}

// Sweeper deletes expired sessions and orphaned staging periodically.
type Sweeper struct {
	store store.Store
	cfg   SweeperConfig

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewSweeper returns a stopped sweeper.
func NewSweeper(st store.Store, cfg SweeperConfig) *Sweeper {
	if cfg.Interval <= 0 {
		cfg.Interval = time.Minute
	}
	if cfg.StagingTTL <= 0 {
		cfg.StagingTTL = time.Hour
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Sweeper{store: st, cfg: cfg}
}

// Start begins sweeping every Interval; it returns at once.
func (s *Sweeper) Start(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cancel != nil {
		return nil
	}
	ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.done = make(chan struct{})
	go s.loop(ctx, s.done)
	return nil
}

// Stop stops the loop and waits for it; calling it twice is fine.
func (s *Sweeper) Stop() {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.cancel = nil
	s.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (s *Sweeper) loop(ctx context.Context, done chan struct{}) {
	defer close(done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.cfg.Clock.After(s.cfg.Interval):
		}
		res := s.SweepOnce(ctx)
		if s.cfg.Swept != nil {
			select {
			case s.cfg.Swept <- res:
			case <-ctx.Done():
				return
			}
		}
	}
}

// SweepOnce runs one sweep now.
func (s *Sweeper) SweepOnce(ctx context.Context) SweepResult {
	now := s.cfg.Clock.Now()
	var res SweepResult
	n, err := s.store.DeleteExpiredSessions(ctx, now)
	if err != nil {
		res.Err = err
		s.cfg.Log.WarnContext(ctx, "sweep expired sessions", "err", err)
		return res
	}
	res.ExpiredSessions = n
	m, err := s.store.CleanupOrphanedStaging(ctx, now.Add(-s.cfg.StagingTTL))
	if err != nil {
		res.Err = err
		s.cfg.Log.WarnContext(ctx, "sweep orphaned staging", "err", err)
		return res
	}
	res.OrphanedStaging = m
	if n > 0 || m > 0 {
		s.cfg.Log.InfoContext(ctx, "swept", "expired_sessions", n, "orphaned_staging", m)
	}
	return res
}
