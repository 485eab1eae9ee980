package api

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// keyCacheTTL bounds how long a key lookup is trusted. A revocation through
// this node takes effect at once (the cache is purged); one made through
// another node takes effect within the TTL.
const keyCacheTTL = 10 * time.Second

var errInvalidKey = errors.New("invalid API key")

// keyCache remembers resolved keys: without it every request paid a store
// read (~14% of CPU on the object call path).
type keyCache struct {
	mu      sync.Mutex
	entries map[string]keyEntry
}

type keyEntry struct {
	p       Principal
	invalid bool
	expires time.Time
}

func (c *keyCache) lookup(ctx context.Context, st store.Store, hash string) (Principal, error) {
	now := time.Now()
	c.mu.Lock()
	e, ok := c.entries[hash]
	c.mu.Unlock()
	if ok && now.Before(e.expires) {
		if e.invalid {
			return Principal{}, errInvalidKey
		}
		return e.p, nil
	}
	k, err := st.GetAPIKeyByHash(ctx, hash)
	invalid := errors.Is(err, store.ErrNotFound) || (err == nil && k.RevokedAt != nil)
	if err != nil && !invalid {
		return Principal{}, err
	}
	e = keyEntry{invalid: invalid, expires: now.Add(keyCacheTTL)}
	if !invalid {
		e.p = Principal{KeyID: k.ID, TenantID: k.TenantID, Admin: k.Admin, EnvironmentID: k.EnvironmentID}
	}
	c.mu.Lock()
	if c.entries == nil || len(c.entries) > 10000 {
		c.entries = map[string]keyEntry{} // bounded: guessed keys cannot grow it forever
	}
	c.entries[hash] = e
	c.mu.Unlock()
	if invalid {
		return Principal{}, errInvalidKey
	}
	return e.p, nil
}

// purge forgets every cached key (after a revocation or a new key).
func (c *keyCache) purge() {
	c.mu.Lock()
	c.entries = nil
	c.mu.Unlock()
}
