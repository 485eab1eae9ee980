package config

import (
	"fmt"
	"time"
)

// WorkQueueConfig is [work_queue]: the environment work queue that
// self_hosted environments' workers poll (issue 16).
type WorkQueueConfig struct {
	// LeaseTTL is the lease an acked work item holds without a heartbeat,
	// and what a heartbeat extends it by unless the worker asks for
	// desired_ttl_seconds. A worker that stops heartbeating loses its item
	// to the queue this long after its last heartbeat.
	LeaseTTL Duration `toml:"lease_ttl"`
}

// DefaultWorkQueue returns the defaults.
func DefaultWorkQueue() WorkQueueConfig {
	return WorkQueueConfig{LeaseTTL: Duration(60 * time.Second)}
}

func (c *Config) validateWorkQueue() []error {
	const lo, hi = 2 * time.Second, 10 * time.Minute
	if c.WorkQueue.LeaseTTL == 0 {
		c.WorkQueue.LeaseTTL = DefaultWorkQueue().LeaseTTL
	}
	if v := c.WorkQueue.LeaseTTL.D(); v < lo || v > hi {
		return []error{&FieldError{Field: "work_queue.lease_ttl", Value: v.String(),
			Accepted: fmt.Sprintf("a duration from %v to %v", lo, hi), Reason: "out of range"}}
	}
	return nil
}
