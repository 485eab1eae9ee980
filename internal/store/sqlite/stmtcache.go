package sqlite

import (
	"context"
	"database/sql"
	"sync"
)

// maxCachedStmts bounds each pool's statement cache. The engine's SQL is
// almost all constant text (a few hundred statements at most); the bound
// only matters for text built per call (ListEvents' type filter), which
// past it runs unprepared as before.
const maxCachedStmts = 512

// pool is a *sql.DB whose ExecContext, QueryContext and QueryRowContext
// run statements prepared once per connection and kept, keyed by their SQL
// text, instead of having SQLite parse and plan the text on every call (a
// fifth of the CPU of a store-bound request). database/sql prepares a
// cached *sql.Stmt lazily on each connection it runs on.
type pool struct {
	*sql.DB
	cache stmtCache
}

func newPool(db *sql.DB) *pool {
	return &pool{DB: db, cache: stmtCache{stmts: map[string]*sql.Stmt{}}}
}

// ExecContext runs query as a cached prepared statement.
func (p *pool) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	st, err := p.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return p.DB.ExecContext(ctx, query, args...)
	}
	return st.ExecContext(ctx, args...)
}

// QueryContext runs query as a cached prepared statement.
func (p *pool) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	st, err := p.stmt(ctx, query)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return p.DB.QueryContext(ctx, query, args...)
	}
	return st.QueryContext(ctx, args...)
}

// QueryRowContext runs query as a cached prepared statement. A failed
// prepare surfaces from Scan, as it does for sql.DB.
func (p *pool) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	st, err := p.stmt(ctx, query)
	if st == nil || err != nil {
		// Without a statement the DB reports the same error from Scan.
		return p.DB.QueryRowContext(ctx, query, args...)
	}
	return st.QueryRowContext(ctx, args...)
}

// stmt returns the cached statement for query, preparing it on first use;
// nil (and no error) when the cache is full.
func (p *pool) stmt(ctx context.Context, query string) (*sql.Stmt, error) {
	if st, ok := p.cache.get(query); ok {
		return st, nil
	}
	if p.cache.full() {
		return nil, nil
	}
	st, err := p.DB.PrepareContext(ctx, query)
	if err != nil {
		return nil, err
	}
	return p.cache.put(query, st), nil
}

// Close closes the cached statements, then the connections.
func (p *pool) Close() error {
	p.cache.closeAll()
	return p.DB.Close()
}

// stmtCache maps SQL text to its prepared statement.
type stmtCache struct {
	mu     sync.RWMutex
	stmts  map[string]*sql.Stmt
	closed bool
}

func (c *stmtCache) get(query string) (*sql.Stmt, bool) {
	c.mu.RLock()
	st, ok := c.stmts[query]
	c.mu.RUnlock()
	return st, ok
}

func (c *stmtCache) full() bool {
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.stmts) >= maxCachedStmts
}

// put stores st for query and returns the statement to use: an earlier
// one when a concurrent caller prepared the same text first, or nil when
// the cache is full or closed (the caller then runs the text unprepared).
// A statement not kept is closed here, so none outlives its call.
func (c *stmtCache) put(query string, st *sql.Stmt) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.stmts[query]; ok {
		_ = st.Close()
		return old
	}
	if c.closed || len(c.stmts) >= maxCachedStmts {
		_ = st.Close()
		return nil
	}
	c.stmts[query] = st
	return st
}

func (c *stmtCache) closeAll() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.stmts {
		_ = st.Close()
	}
	c.stmts, c.closed = map[string]*sql.Stmt{}, true
}
