package managed

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/clock"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// SchedulerConfig configures the deployment scheduler.
type SchedulerConfig struct {
	// Clock is the scheduler's clock (default real time).
	Clock clock.Clock
	// Interval is how often due deployments are polled (default 5s; cron
	// is per minute).
	Interval time.Duration
	// Batch bounds the fires claimed per poll (default 100).
	Batch int
	// AfterClaim, when set, runs after a fire is claimed and before its
	// session is created (crash tests hang there).
	AfterClaim func(runID string)
	Log        *slog.Logger
}

// DeploymentScheduler fires scheduled deployments. A deployment's next
// fire is stored on its row (like an object's alarm); a poll claims each
// due fire in one transaction that writes the run and advances the fire
// to the schedule's first time after now, so fires missed while the
// daemon was down make one run, not one per missed tick. The claimed run's
// session is created after; runs a crash left unstarted are started at
// Start and on each poll.
type DeploymentScheduler struct {
	svc    *Service
	cfg    SchedulerConfig
	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewDeploymentScheduler builds the scheduler of s's deployments (nil
// when the store keeps none).
func (s *Service) NewDeploymentScheduler(cfg SchedulerConfig) *DeploymentScheduler {
	if s.depl == nil {
		return nil
	}
	if cfg.Clock == nil {
		cfg.Clock = clock.Real{}
	}
	if cfg.Interval <= 0 {
		cfg.Interval = 5 * time.Second
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 100
	}
	if cfg.Log == nil {
		cfg.Log = s.log
	}
	return &DeploymentScheduler{svc: s, cfg: cfg}
}

// Start starts polling; it returns at once.
func (d *DeploymentScheduler) Start(ctx context.Context) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.cancel != nil {
		return nil
	}
	ctx, d.cancel = context.WithCancel(context.WithoutCancel(ctx))
	d.done = make(chan struct{})
	go d.loop(ctx)
	return nil
}

// Stop stops polling and waits for the poll in progress.
func (d *DeploymentScheduler) Stop() {
	d.mu.Lock()
	cancel, done := d.cancel, d.done
	d.mu.Unlock()
	if cancel == nil {
		return
	}
	cancel()
	<-done
}

func (d *DeploymentScheduler) loop(ctx context.Context) {
	defer close(d.done)
	for {
		if _, err := d.Poll(ctx); err != nil && ctx.Err() == nil {
			d.cfg.Log.Warn("deployment scheduler poll failed", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-d.cfg.Clock.After(d.cfg.Interval):
		}
	}
}

// Poll starts the runs a crash left unstarted, then claims and starts
// every due fire; it returns the runs it started.
func (d *DeploymentScheduler) Poll(ctx context.Context) (int, error) {
	started, err := d.Recover(ctx)
	if err != nil {
		return started, err
	}
	due, err := d.svc.depl.DueDeployments(ctx, d.cfg.Clock.Now(), d.cfg.Batch)
	if err != nil {
		return started, err
	}
	for _, row := range due {
		run, err := d.claim(ctx, row)
		if errors.Is(err, store.ErrConflict) {
			continue // paused, archived, rescheduled or claimed meanwhile
		}
		if err != nil {
			return started, err
		}
		if d.cfg.AfterClaim != nil {
			d.cfg.AfterClaim(run.ID)
		}
		if _, err := d.svc.startRun(ctx, run); err != nil {
			return started, err
		}
		started++
	}
	return started, nil
}

// claim claims row's due fire: its run is written and its next fire
// becomes the schedule's first time after now.
func (d *DeploymentScheduler) claim(ctx context.Context, row *store.Deployment) (*store.DeploymentRun, error) {
	doc, err := decodeDeploymentDoc(row.Doc)
	if err != nil {
		return nil, err
	}
	now := d.cfg.Clock.Now().UTC()
	next, err := nextFire(row, doc, now)
	if err != nil {
		return nil, err
	}
	fireAt := *row.NextFireAt
	return d.svc.depl.ClaimDeploymentFire(ctx, row.ID, fireAt, next, &store.DeploymentRun{ID: ids.New("drun"),
		TenantID: row.TenantID, DeploymentID: row.ID, Agent: MustJSON(doc.Agent), Trigger: store.TriggerSchedule,
		ScheduledAt: &fireAt, CreatedAt: now})
}

// Recover starts the claimed runs that have neither session nor error.
func (d *DeploymentScheduler) Recover(ctx context.Context) (int, error) {
	runs, err := d.svc.depl.UnstartedDeploymentRuns(ctx)
	if err != nil {
		return 0, err
	}
	for i, r := range runs {
		if _, err := d.svc.startRun(ctx, r); err != nil {
			return i, err
		}
	}
	return len(runs), nil
}
