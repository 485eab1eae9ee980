// Package postgres is the PostgreSQL engine of store.Store, built on pgx v5
// and pgxpool. It is the engine for clusters: several serve nodes may open
// the same database at once, so migrations run under an advisory lock and
// every write that must be atomic is one transaction whose races are settled
// by row locks on the session row.
package postgres

import (
	"context"
	"fmt"
	"log/slog"
	"regexp"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Store is the Postgres engine. It is safe for concurrent use.
type Store struct {
	pool   *pgxpool.Pool
	log    *slog.Logger
	now    func() time.Time
	schema string
	// outbox wakes the webhook delivery loop after commits that wrote
	// outbox rows.
	outbox store.OutboxNotifier
}

var _ store.Store = (*Store)(nil)

// Option configures Open.
type Option func(*options)

type options struct {
	log    *slog.Logger
	now    func() time.Time
	schema string
}

// WithLogger sets the logger (default: discard).
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithClock sets the clock used for timestamps the engine writes.
func WithClock(now func() time.Time) Option { return func(o *options) { o.now = now } }

// WithSchema puts every table in schema (created if missing) by setting the
// connections' search_path. Tests use it to isolate one database per test.
func WithSchema(schema string) Option { return func(o *options) { o.schema = schema } }

var schemaName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// Open connects to url (a libpq URL or DSN; pool_max_conns and friends are
// honoured), applies pending migrations and returns the store.
func Open(ctx context.Context, url string, opts ...Option) (*Store, error) {
	o := options{log: slog.New(slog.DiscardHandler), now: time.Now}
	for _, opt := range opts {
		opt(&o)
	}
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		return nil, fmt.Errorf("postgres: parse url: %w", err)
	}
	if o.schema != "" {
		if !schemaName.MatchString(o.schema) {
			return nil, fmt.Errorf("postgres: schema %q: want lower-case letters, digits and _: %w", o.schema, store.ErrInvalid)
		}
		if err := createSchema(ctx, cfg.ConnConfig, o.schema); err != nil {
			return nil, err
		}
		cfg.ConnConfig.RuntimeParams["search_path"] = o.schema
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("postgres: connect: %w", err)
	}
	s := &Store{pool: pool, log: o.log, now: o.now, schema: o.schema}
	if err := s.migrate(ctx); err != nil {
		pool.Close()
		return nil, err
	}
	return s, nil
}

func createSchema(ctx context.Context, cc *pgx.ConnConfig, schema string) error {
	conn, err := pgx.ConnectConfig(ctx, cc.Copy())
	if err != nil {
		return fmt.Errorf("postgres: connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if _, err := conn.Exec(ctx, "CREATE SCHEMA IF NOT EXISTS "+pgx.Identifier{schema}.Sanitize()); err != nil {
		// Two nodes creating the schema at once can race on the catalog.
		if !isUniqueViolation(err) {
			return fmt.Errorf("postgres: create schema %s: %w", schema, err)
		}
	}
	return nil
}

// Close closes the pool. Closing twice is harmless.
func (s *Store) Close() error {
	s.pool.Close()
	return nil
}

// Engine reports "postgres".
func (s *Store) Engine() string { return "postgres" }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.pool.Ping(ctx); err != nil {
		return fmt.Errorf("postgres: ping: %w", err)
	}
	return nil
}

// clock returns the current time at the precision Postgres stores, so values
// returned from a write equal the values read back later.
func (s *Store) clock() time.Time {
	return s.now().UTC().Truncate(time.Microsecond)
}
