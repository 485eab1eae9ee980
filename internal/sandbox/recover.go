package sandbox

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

// RecoverReport says what Recover found.
type RecoverReport struct {
	Reattached int
	MarkedCold int
	Failed     int
}

// Recover runs at daemon start: every sandbox whose record says it runs is
// reattached through its driver, or marked cold when the instance is gone.
// A stop that was cut short (StoppingAt set) is undone: the sandbox was
// never stopped without a verified snapshot, so it is either still running
// (active again; the idle reaper will retry) or gone (cold).
func (m *Manager) Recover(ctx context.Context) (RecoverReport, error) {
	var rep RecoverReport
	// First: an assignment from the warm pool that an earlier process left
	// half done has the sandbox's files in the pool's directories.
	if err := m.sweepPoolOnce(ctx); err != nil {
		return rep, fmt.Errorf("sandbox pool left by an earlier run: %w", err)
	}
	sbs, err := m.cfg.Store.ListSandboxes(ctx, store.ListSandboxesParams{Running: true, Node: m.cfg.Node})
	if err != nil {
		return rep, err
	}
	for _, sb := range sbs {
		if Derive(sb) == StateDestroyed || (len(sb.Handle) == 0 && sb.StoppingAt == nil) {
			continue
		}
		e := m.entry(sb.ID)
		e.mu.Lock()
		err := m.recoverOne(ctx, e, sb)
		e.mu.Unlock()
		switch {
		case err == nil && len(sb.Handle) > 0:
			rep.Reattached++
		case errors.Is(err, errMarkedCold):
			rep.MarkedCold++
		case err != nil:
			rep.Failed++
			m.log.WarnContext(ctx, "sandbox recovery failed", "sandbox", sb.ID, "err", err)
		}
	}
	m.log.InfoContext(ctx, "sandboxes recovered", "reattached", rep.Reattached, "cold", rep.MarkedCold, "failed", rep.Failed)
	return rep, nil
}

var errMarkedCold = errors.New("marked cold")

func (m *Manager) recoverOne(ctx context.Context, e *entry, sb *store.Sandbox) error {
	if sb.StoppingAt != nil {
		sb.StoppingAt = nil
		var err error
		if sb, err = m.cfg.Store.UpdateSandbox(ctx, sb); err != nil {
			return err
		}
	}
	if len(sb.Handle) == 0 {
		return nil
	}
	if err := m.attach(ctx, e, sb); err != nil {
		if _, err := m.markCold(ctx, sb); err != nil {
			return err
		}
		return errMarkedCold
	}
	return nil
}
