package sqlite

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	"go.uber.org/goleak"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/storetest"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// openTemp opens a fresh database in tb's temp dir and closes it at cleanup.
func openTemp(tb testing.TB, opts ...Option) *Store {
	tb.Helper()
	s, err := Open(context.Background(), filepath.Join(tb.TempDir(), "state.db"), opts...)
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// TestContract runs the one store contract suite on every compiled-in
// driver (just modernc unless -tags sqlite_mattn or sqlite_ncruces).
func TestContract(t *testing.T) {
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			storetest.Exercise(context.Background(), t, func(t *testing.T) store.Store {
				return openTemp(t, WithDriver(d))
			})
		})
	}
}

// BenchmarkStore is the driver comparison: the same storetest workload on
// every compiled-in driver.
//
//	go test -run '^$' -bench BenchmarkStore -tags sqlite_mattn ./internal/store/sqlite/
//	go test -run '^$' -bench BenchmarkStore -tags sqlite_ncruces ./internal/store/sqlite/
func BenchmarkStore(b *testing.B) {
	for _, d := range Drivers() {
		b.Run(d, func(b *testing.B) {
			storetest.Benchmark(b, func(tb testing.TB) store.Store { return openTemp(tb, WithDriver(d)) })
		})
	}
}

func TestUnknownDriverRefused(t *testing.T) {
	_, err := Open(context.Background(), filepath.Join(t.TempDir(), "state.db"), WithDriver("oracle"))
	if !errors.Is(err, store.ErrInvalid) {
		t.Fatalf("got %v, want ErrInvalid", err)
	}
}

// TestPragmas checks that every driver really applies the DSN pragmas
// (each spells them differently) on the write connection.
func TestPragmas(t *testing.T) {
	ctx := context.Background()
	for _, d := range Drivers() {
		for _, full := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/full=%v", d, full), func(t *testing.T) {
				opts := []Option{WithDriver(d)}
				want := int64(1) // NORMAL
				if full {
					opts, want = append(opts, WithSyncFull()), 2
				}
				s := openTemp(t, opts...)
				var mode string
				var fk, sync, busy int64
				row := func(q string, dst any) {
					t.Helper()
					if err := s.write.QueryRowContext(ctx, q).Scan(dst); err != nil {
						t.Fatalf("%s: %v", q, err)
					}
				}
				row(`PRAGMA journal_mode`, &mode)
				row(`PRAGMA foreign_keys`, &fk)
				row(`PRAGMA synchronous`, &sync)
				row(`PRAGMA busy_timeout`, &busy)
				if mode != "wal" || fk != 1 || sync != want || busy != 10000 {
					t.Fatalf("journal_mode=%s foreign_keys=%d synchronous=%d busy_timeout=%d; want wal 1 %d 10000",
						mode, fk, sync, want, busy)
				}
			})
		}
	}
}
