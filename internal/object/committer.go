package object

import (
	"context"
	"log/slog"
	"sync"

	"github.com/agentkernel/agentkernel/internal/store"
)

// committer group-commits write-through writes: while one transaction
// runs, the writes of every call that finishes meanwhile queue up and go
// into the next transaction together, so many objects share one fsync.
type committer struct {
	st  store.ObjectStore
	log *slog.Logger

	mu      sync.Mutex
	pending []*commitReq
	running bool
	kick    chan struct{}
	done    chan struct{}
}

type commitReq struct {
	key    store.ObjectKey
	writes []store.StorageWrite
	err    chan error
}

func newCommitter(st store.ObjectStore, log *slog.Logger) *committer {
	return &committer{st: st, log: log, kick: make(chan struct{}, 1)}
}

func (c *committer) start() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.running {
		return
	}
	c.running, c.done = true, make(chan struct{})
	go c.loop(c.done)
}

// stop commits what is pending and waits for the loop; idempotent.
func (c *committer) stop() {
	c.mu.Lock()
	if !c.running {
		c.mu.Unlock()
		return
	}
	c.running = false
	done := c.done
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	<-done
}

// commit makes writes durable; it returns once they are (or failed).
func (c *committer) commit(ctx context.Context, key store.ObjectKey, writes []store.StorageWrite) error {
	c.mu.Lock()
	if !c.running {
		c.mu.Unlock()
		_, err := c.st.ApplyStorageWrites(ctx, key, writes)
		return err
	}
	req := &commitReq{key: key, writes: writes, err: make(chan error, 1)}
	c.pending = append(c.pending, req)
	c.mu.Unlock()
	select {
	case c.kick <- struct{}{}:
	default:
	}
	// Wait even if ctx ends: the caller must not answer before the outcome
	// is known.
	return <-req.err
}

func (c *committer) loop(done chan struct{}) {
	defer close(done)
	for {
		<-c.kick
		for {
			c.mu.Lock()
			batch := c.pending
			c.pending = nil
			running := c.running
			c.mu.Unlock()
			if len(batch) == 0 {
				if !running {
					return
				}
				break
			}
			c.apply(batch)
		}
	}
}

func (c *committer) apply(batch []*commitReq) {
	ctx := context.Background()
	if len(batch) == 1 {
		_, err := c.st.ApplyStorageWrites(ctx, batch[0].key, batch[0].writes)
		batch[0].err <- err
		return
	}
	merged := map[store.ObjectKey][]store.StorageWrite{}
	for _, r := range batch {
		merged[r.key] = append(merged[r.key], r.writes...)
	}
	if err := c.st.ApplyStorageWriteBatch(ctx, merged); err == nil {
		for _, r := range batch {
			r.err <- nil
		}
		return
	} else {
		c.log.Warn("object: group commit failed; committing one by one", "objects", len(merged), "err", err)
	}
	// One object's failure (e.g. deleted meanwhile) must not fail the rest.
	for _, r := range batch {
		_, err := c.st.ApplyStorageWrites(ctx, r.key, r.writes)
		r.err <- err
	}
}
