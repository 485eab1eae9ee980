package daemon

import "context"

// Service is the one lifecycle every background loop shares (hibernation
// reaper, alarm poller, recovery sweeper, monitor): Start returns once the
// service runs; Stop is idempotent and waits until every goroutine the
// service started has returned.
type Service interface {
	Start(ctx context.Context) error
	Stop()
}
