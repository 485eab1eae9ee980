package object

import (
	"context"
	"time"

	"github.com/agentkernel/agentkernel/internal/clock"
)

// loop runs pass every interval on the injected clock until stopped. Both
// the idle reaper and the alarm poller are loops, so they share one
// start/stop contract.
type loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// startLoop starts pass; runNow also runs it once at start (the alarm
// poller fires what came due while the daemon was down).
func startLoop(c clock.Clock, interval time.Duration, runNow bool, pass func(ctx context.Context)) *loop {
	ctx, cancel := context.WithCancel(context.Background())
	l := &loop{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		if runNow {
			pass(ctx)
		}
		for {
			select {
			case <-ctx.Done():
				return
			case <-c.After(interval):
			}
			pass(ctx)
		}
	}()
	return l
}

func (l *loop) stop() {
	l.cancel()
	<-l.done
}
