// Package sqlite is agentkernel's embedded storage engine: one SQLite file in
// WAL mode, the default when no Postgres URL is configured.
//
// SQLite admits one writer at a time. The store therefore keeps a single
// write connection (every write transaction queues on it inside the process,
// so writers never see SQLITE_BUSY from each other) and a separate pool of
// read connections that, in WAL mode, never block on or block the writer.
//
// Durability: the default is synchronous=NORMAL. In WAL mode a commit has
// been written to the WAL file (the OS page cache) before COMMIT returns, so
// it survives a crash or SIGKILL of the process; only an OS crash or power
// loss can roll back the last commits (never corrupt the file). WithSyncFull
// fsyncs every commit for machines where that matters, at the cost of one
// fsync per write transaction.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Store is the SQLite engine. It is safe for concurrent use.
type Store struct {
	write  *pool // exactly one connection: SQLite's one writer
	read   *pool // WAL readers
	drv    driver
	now    func() time.Time
	logger *slog.Logger
	// failpoint, when set, runs at named points inside transactions
	// (WithFailpoint).
	failpoint func(point, what string)
	// outbox wakes the webhook delivery loop after commits that wrote
	// outbox rows.
	outbox store.OutboxNotifier
}

var _ store.Store = (*Store)(nil)

type config struct {
	syncFull     bool
	busyTimeout  time.Duration
	readConns    int
	now          func() time.Time
	logger       *slog.Logger
	migrationsFS migrationSource
	driver       string
	failpoint    func(point, what string)
}

// Option configures Open.
type Option func(*config)

// WithSyncFull makes every commit fsync (synchronous=FULL): durable across
// power loss, not only across process crashes.
func WithSyncFull() Option { return func(c *config) { c.syncFull = true } }

// WithBusyTimeout sets how long a connection waits for a lock held by another
// process (for example the CLI opening the same file). Default 10s.
func WithBusyTimeout(d time.Duration) Option { return func(c *config) { c.busyTimeout = d } }

// WithReadConns sets the size of the read pool. Default max(4, GOMAXPROCS).
func WithReadConns(n int) Option { return func(c *config) { c.readConns = n } }

// WithClock injects the clock used for created/updated timestamps.
func WithClock(now func() time.Time) Option { return func(c *config) { c.now = now } }

// withMigrations replaces the embedded migrations (tests of upgrades).
func withMigrations(src migrationSource) Option { return func(c *config) { c.migrationsFS = src } }

// WithDriver picks a compiled-in driver by label: "modernc" (the default),
// "mattn" with -tags sqlite_mattn, "ncruces" with -tags sqlite_ncruces.
func WithDriver(label string) Option { return func(c *config) { c.driver = label } }

// Drivers lists the labels of the compiled-in drivers, default first.
func Drivers() []string {
	var out []string
	for _, d := range availableDrivers() {
		out = append(out, d.label)
	}
	return out
}

func pickDriver(label string) (driver, error) {
	all := availableDrivers()
	if label == "" {
		return all[0], nil
	}
	for _, d := range all {
		if d.label == label {
			return d, nil
		}
	}
	return driver{}, fmt.Errorf("sqlite: driver %q is not compiled in (have %v): %w", label, Drivers(), store.ErrInvalid)
}

// WithFailpoint sets a function called at named points inside
// transactions, before they commit (crash tests hang there and kill the
// process): "session-migrate" (what: the session moved to the one session
// model), "fork" (the new session), "rewind" (the session).
func WithFailpoint(fn func(point, what string)) Option {
	return func(c *config) { c.failpoint = fn }
}

// WithLogger injects the logger.
func WithLogger(l *slog.Logger) Option { return func(c *config) { c.logger = l } }

// Open opens (creating if needed) the database at path and applies pending
// migrations. It refuses a database whose schema is newer than this binary.
func Open(ctx context.Context, path string, opts ...Option) (*Store, error) {
	cfg := config{
		busyTimeout:  10 * time.Second,
		readConns:    max(4, runtime.GOMAXPROCS(0)),
		now:          time.Now,
		logger:       slog.New(slog.DiscardHandler),
		migrationsFS: embeddedMigrations,
	}
	for _, o := range opts {
		o(&cfg)
	}
	if path == "" || strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("sqlite: path %q: must be a file path without '?' or '#': %w", path, store.ErrInvalid)
	}
	drv, err := pickDriver(cfg.driver)
	if err != nil {
		return nil, err
	}
	sync := "NORMAL"
	if cfg.syncFull {
		sync = "FULL"
	}
	pragmas := []pragma{
		{"journal_mode", "WAL"},
		{"busy_timeout", fmt.Sprint(cfg.busyTimeout.Milliseconds())},
		{"foreign_keys", "1"},
		{"synchronous", sync},
	}

	// The writer keeps temporary files in memory: in a multi-statement
	// transaction every statement writes a statement journal (for its own
	// rollback, never read after COMMIT) that would otherwise spill to a
	// temp file past 64 KiB, a batch of events costing syscalls per page.
	// mattn has no DSN key for it and keeps the default.
	writePragmas := append(slices.Clone(pragmas), pragma{"temp_store", "MEMORY"})
	write, err := sql.Open(drv.name, drv.dsn(path, writePragmas, true))
	if err != nil {
		return nil, fmt.Errorf("sqlite: open %s: %w", path, err)
	}
	write.SetMaxOpenConns(1)
	write.SetMaxIdleConns(1)
	write.SetConnMaxLifetime(0)
	write.SetConnMaxIdleTime(0)
	s := &Store{write: newPool(write), drv: drv, now: cfg.now, logger: cfg.logger, failpoint: cfg.failpoint}

	if err := s.migrate(ctx, cfg.migrationsFS); err != nil {
		_ = write.Close()
		return nil, err
	}
	if err := s.migrateSessions(ctx); err != nil {
		_ = write.Close()
		return nil, err
	}

	// Readers open after migration so the file is already in WAL mode; they
	// need no journal_mode pragma (it is persistent in the file).
	read, err := sql.Open(drv.name, drv.dsn(path, pragmas[1:], false))
	if err != nil {
		_ = write.Close()
		return nil, fmt.Errorf("sqlite: open %s for reading: %w", path, err)
	}
	read.SetMaxOpenConns(cfg.readConns)
	read.SetMaxIdleConns(cfg.readConns)
	s.read = newPool(read)
	if err := s.Ping(ctx); err != nil {
		_ = s.Close()
		return nil, err
	}
	cfg.logger.Debug("sqlite store opened", slog.String("path", path), slog.String("driver", drv.label),
		slog.String("synchronous", sync))
	return s, nil
}

// Engine implements store.Store.
func (s *Store) Engine() string { return "sqlite" }

// Ping implements store.Store.
func (s *Store) Ping(ctx context.Context) error {
	if err := s.write.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping writer: %w", err)
	}
	if err := s.read.PingContext(ctx); err != nil {
		return fmt.Errorf("sqlite: ping reader: %w", err)
	}
	return nil
}

// Close closes both pools.
func (s *Store) Close() error {
	var errs []error
	if s.read != nil {
		errs = append(errs, s.read.Close())
	}
	errs = append(errs, s.write.Close())
	return errors.Join(errs...)
}

// reach calls the failpoint hook, if any.
func (s *Store) reach(point, what string) {
	if s.failpoint != nil {
		s.failpoint(point, what)
	}
}

// timestamp returns the store clock's now, truncated to the microsecond the
// schema keeps, so values returned by a write equal values read back later.
func (s *Store) timestamp() time.Time {
	return s.now().UTC().Truncate(time.Microsecond)
}

// inTx runs fn in one write transaction (BEGIN IMMEDIATE on the single write
// connection) and commits when fn returns nil. Constraint failures fn did
// not map itself become store sentinels here, at the boundary.
func (s *Store) inTx(ctx context.Context, fn func(tx *wtx) error) error {
	sqlTx, err := s.write.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin: %w", err)
	}
	tx := &wtx{Tx: sqlTx, pool: s.write}
	gen := s.outbox.Gen()
	// Only now, with the write connection free again, can statements the
	// transaction ran unprepared be prepared for the next one.
	defer func() {
		if len(tx.missed) > 0 {
			s.write.prepareMissed(ctx, tx.missed)
		}
	}()
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return s.drv.mapConstraint(err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sqlite: commit: %w", err)
	}
	s.outbox.AfterCommit(gen)
	return nil
}
