package monitor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

// defaultPullWait is one long-poll of the guest's agent event relay; after
// each, the relay also looks whether the agent process exited.
const defaultPullWait = 10 * time.Second

// pump relays one sandbox's agent events from its guest into the store.
type pump struct {
	cancel context.CancelFunc
	done   chan struct{}
	after  atomic.Int64 // the last seq stored
}

// hasPump reports whether a relay runs for the sandbox.
func (s *Service) hasPump(sandboxID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.pumps[sandboxID]
	return ok
}

// ensurePump starts a relay for the running task's sandbox unless one runs.
func (s *Service) ensurePump(t *store.Task) {
	if s.cfg.NoPumps {
		return
	}
	sandboxID := t.SandboxID
	s.mu.Lock()
	if _, ok := s.pumps[sandboxID]; ok || s.stopped {
		s.mu.Unlock()
		return
	}
	p := &pump{done: make(chan struct{})}
	ctx, cancel := context.WithCancel(s.ctx)
	p.cancel = cancel
	s.pumps[sandboxID] = p
	s.wg.Add(1)
	s.mu.Unlock()
	go func() {
		defer s.wg.Done()
		defer close(p.done)
		defer func() {
			s.mu.Lock()
			if s.pumps[sandboxID] == p {
				delete(s.pumps, sandboxID)
			}
			s.mu.Unlock()
		}()
		s.runPump(ctx, p, t)
	}()
}

// stopPump ends a sandbox's relay and waits for it, so its long-poll (which
// holds the sandbox's call lock) never delays a stop. It returns the last
// seq the relay stored (0 when none ran).
func (s *Service) stopPump(sandboxID string) int64 {
	s.mu.Lock()
	p := s.pumps[sandboxID]
	s.mu.Unlock()
	if p == nil {
		return 0
	}
	p.cancel()
	<-p.done
	return p.after.Load()
}

// runPump long-polls the guest. The guest drops what a pull with after=N
// acknowledges, so events are relayed at least once and in order; the
// acknowledged cursor lives in the guest, so a restarted daemon continues
// where the last one stored.
//
// It also notices the agent's exit, so a check never polls every guest:
// after each pull it asks whether the process ended and, if so, stores the
// last events and settles the task.
func (s *Service) runPump(ctx context.Context, p *pump, t *store.Task) {
	tenantID, sandboxID := t.TenantID, t.SandboxID
	for ctx.Err() == nil {
		after := p.after.Load()
		in, err := s.sbx.Get(ctx, tenantID, sandboxID)
		if err != nil || in.State == sandbox.StateDestroyed {
			return
		}
		if in.State != sandbox.StateActive {
			// Never wake a stopped sandbox just to read its events.
			if !pause(ctx, time.Second) {
				return
			}
			continue
		}
		var evs []guest.AgentEvent
		err = s.sbx.Client(ctx, tenantID, sandboxID, func(c *guest.Client) error {
			var err error
			evs, err = c.PullAgentEvents(ctx, after, s.cfg.PullWait)
			return err
		})
		if err != nil {
			if ctx.Err() == nil {
				s.log.DebugContext(ctx, "monitor: pull agent events", "sandbox", sandboxID, "err", err)
			}
			if !pause(ctx, time.Second) {
				return
			}
			continue
		}
		if len(evs) > 0 {
			if err := s.relay(ctx, sandboxID, evs); err != nil {
				s.log.WarnContext(ctx, "monitor: store agent events", "sandbox", sandboxID, "err", err)
				if !pause(ctx, time.Second) {
					return
				}
				continue
			}
			p.after.Store(evs[len(evs)-1].Seq)
		}
		if t.ProcessID == "" {
			continue
		}
		if code, exited := s.processExited(ctx, t); exited {
			s.drain(ctx, t, p.after.Load())
			s.finishExited(ctx, t, code)
			return
		}
	}
}

// relay stores pulled events. The guest already refused malformed ones; an
// event the daemon's own limits refuse is dropped with a warning rather
// than blocking the relay forever.
func (s *Service) relay(ctx context.Context, sandboxID string, evs []guest.AgentEvent) error {
	now := s.clock.Now()
	in := make([]EventInput, 0, len(evs))
	for i, ev := range evs {
		e := EventInput{Type: ev.Type, Status: ev.Status, Data: ev.Data}
		if err := s.Validate(i, e, now); err != nil {
			s.log.WarnContext(ctx, "monitor: dropped agent event", "sandbox", sandboxID, "seq", ev.Seq, "err", err)
			continue
		}
		in = append(in, e)
	}
	if len(in) == 0 {
		return nil
	}
	_, err := s.Ingest(ctx, sandboxID, in)
	return err
}

// pause waits d of real time: it paces I/O retries, it decides nothing.
func pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
