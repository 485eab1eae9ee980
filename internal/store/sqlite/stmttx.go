package sqlite

import (
	"context"
	"database/sql"
)

// wtx is a write transaction that runs statements already prepared on the
// write connection (Tx.StmtContext reuses the connection's prepared
// statement) instead of re-preparing their text.
//
// A statement not in the cache yet cannot be prepared on the pool while
// the transaction holds its only connection, so it runs unprepared this
// once and is prepared after the transaction ends (see inTx).
type wtx struct {
	*sql.Tx
	pool   *pool
	missed []string
}

// ExecContext runs query within the transaction.
func (t *wtx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if st := t.stmt(ctx, query); st != nil {
		return st.ExecContext(ctx, args...)
	}
	return t.Tx.ExecContext(ctx, query, args...)
}

// QueryContext runs query within the transaction.
func (t *wtx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryContext(ctx, args...)
	}
	return t.Tx.QueryContext(ctx, query, args...)
}

// QueryRowContext runs query within the transaction.
func (t *wtx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if st := t.stmt(ctx, query); st != nil {
		return st.QueryRowContext(ctx, args...)
	}
	return t.Tx.QueryRowContext(ctx, query, args...)
}

// PrepareContext returns a transaction-bound statement for a loop; it is
// closed with the transaction, and closing it earlier is harmless.
func (t *wtx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	if st := t.stmt(ctx, query); st != nil {
		return st, nil
	}
	return t.Tx.PrepareContext(ctx, query)
}

// stmt returns the cached statement bound to the transaction, or nil (and
// notes the text) when it is not cached.
func (t *wtx) stmt(ctx context.Context, query string) *sql.Stmt {
	st, ok := t.pool.cache.get(query)
	if !ok {
		t.missed = append(t.missed, query)
		return nil
	}
	return t.Tx.StmtContext(ctx, st)
}

// prepareMissed caches the statements the transaction ran unprepared. It
// runs after the transaction released the write connection; a failure only
// means the next transaction tries again.
func (p *pool) prepareMissed(ctx context.Context, queries []string) {
	for _, q := range queries {
		if _, ok := p.cache.get(q); ok || p.cache.full() {
			continue
		}
		if st, err := p.DB.PrepareContext(ctx, q); err == nil {
			p.cache.put(q, st)
		}
	}
}
