package sqlite

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

func cached(p *pool) int {
	p.cache.mu.RLock()
	defer p.cache.mu.RUnlock()
	return len(p.cache.stmts)
}

// TestStmtCacheReusesStatements: a text is prepared once per pool, however
// often and however concurrently it runs.
func TestStmtCacheReusesStatements(t *testing.T) {
	ctx := context.Background()
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			s := openTemp(t, WithDriver(d))
			before := cached(s.read)
			const q = `SELECT ? + 1`
			var wg sync.WaitGroup
			for i := range 16 {
				wg.Go(func() {
					var n int
					if err := s.read.QueryRowContext(ctx, q, i).Scan(&n); err != nil || n != i+1 {
						t.Errorf("SELECT %d + 1 = %d, %v", i, n, err)
					}
				})
			}
			wg.Wait()
			if got := cached(s.read); got != before+1 {
				t.Fatalf("cached statements went from %d to %d, want one more", before, got)
			}
			st, ok := s.read.cache.get(q)
			if !ok {
				t.Fatal("the statement is not cached")
			}
			for range 3 {
				if _, err := s.read.QueryContext(ctx, q, 1); err != nil {
					t.Fatal(err)
				}
			}
			if again, _ := s.read.cache.get(q); again != st {
				t.Fatal("the cached statement was replaced")
			}
		})
	}
}

// TestStmtCacheInTransactions: a statement a transaction ran unprepared is
// prepared once the transaction ends; the next transaction runs it cached.
func TestStmtCacheInTransactions(t *testing.T) {
	ctx := context.Background()
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			s := openTemp(t, WithDriver(d))
			if _, err := s.write.DB.ExecContext(ctx, `CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)`); err != nil {
				t.Fatal(err)
			}
			const ins = `INSERT INTO kv (k, v) VALUES (?, ?)`
			var missed [][]string
			for i := range 3 {
				err := s.inTx(ctx, func(tx *wtx) error {
					stmt, err := tx.PrepareContext(ctx, ins)
					if err != nil {
						return err
					}
					for j := range 2 {
						if _, err := stmt.ExecContext(ctx, fmt.Sprintf("k%d-%d", i, j), j); err != nil {
							return err
						}
					}
					var n int
					if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM kv`).Scan(&n); err != nil {
						return err
					}
					if n != 2*(i+1) {
						return fmt.Errorf("transaction %d sees %d rows, want %d", i, n, 2*(i+1))
					}
					missed = append(missed, tx.missed)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			if len(missed[0]) != 2 || len(missed[1]) != 0 || len(missed[2]) != 0 {
				t.Fatalf("unprepared statements per transaction: %q; want 2, then none", missed)
			}
			// A rolled-back transaction leaves nothing behind.
			err := s.inTx(ctx, func(tx *wtx) error {
				if _, err := tx.ExecContext(ctx, ins, "rolled-back", 1); err != nil {
					return err
				}
				_, err := tx.ExecContext(ctx, ins, "rolled-back", 2)
				return err
			})
			if err == nil {
				t.Fatal("inserting one key twice succeeded")
			}
			var n int
			if err := s.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM kv WHERE k = 'rolled-back'`).Scan(&n); err != nil || n != 0 {
				t.Fatalf("rolled-back rows: %d, %v", n, err)
			}
		})
	}
}

// TestStmtCacheSeesNewData: a cached read statement holds no snapshot
// between runs (it is reset), and re-prepares itself after a schema change.
func TestStmtCacheSeesNewData(t *testing.T) {
	ctx := context.Background()
	for _, d := range Drivers() {
		t.Run(d, func(t *testing.T) {
			s := openTemp(t, WithDriver(d))
			if _, err := s.write.DB.ExecContext(ctx, `CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER)`); err != nil {
				t.Fatal(err)
			}
			for i := range 3 {
				if _, err := s.write.ExecContext(ctx, `INSERT INTO kv (k, v) VALUES (?, ?)`, fmt.Sprint(i), i); err != nil {
					t.Fatal(err)
				}
				// Read a row, then stop early: closing must release it.
				rows, err := s.read.QueryContext(ctx, `SELECT v FROM kv ORDER BY k`)
				if err != nil {
					t.Fatal(err)
				}
				rows.Next()
				rows.Close()
				var n int
				if err := s.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM kv`).Scan(&n); err != nil || n != i+1 {
					t.Fatalf("after %d inserts the cached count reads %d, %v", i+1, n, err)
				}
			}
			// A statement cached before a schema change re-prepares itself
			// (the engine only changes its schema while migrating at Open,
			// before anything is cached; some drivers keep a statement's
			// column names, so a cached SELECT * would keep the old ones).
			const get = `SELECT v FROM kv WHERE k = ?`
			var v int
			if err := s.read.QueryRowContext(ctx, get, "2").Scan(&v); err != nil || v != 2 {
				t.Fatalf("v = %d, %v", v, err)
			}
			if _, err := s.write.DB.ExecContext(ctx, `DROP TABLE kv`); err != nil {
				t.Fatal(err)
			}
			if _, err := s.write.DB.ExecContext(ctx, `CREATE TABLE kv (x INTEGER, k TEXT PRIMARY KEY, v INTEGER)`); err != nil {
				t.Fatal(err)
			}
			if _, err := s.write.ExecContext(ctx, `INSERT INTO kv (x, k, v) VALUES (7, '2', 42)`); err != nil {
				t.Fatal(err)
			}
			if err := s.read.QueryRowContext(ctx, get, "2").Scan(&v); err != nil || v != 42 {
				t.Fatalf("after the table was recreated the cached statement reads v = %d, %v; want 42", v, err)
			}
		})
	}
}

// TestStmtCacheBounded: past maxCachedStmts texts run unprepared, and
// correctly.
func TestStmtCacheBounded(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	for i := range maxCachedStmts + 20 {
		var n int
		q := fmt.Sprintf(`SELECT %d + ?`, i)
		if err := s.read.QueryRowContext(ctx, q, 1).Scan(&n); err != nil || n != i+1 {
			t.Fatalf("%s = %d, %v", q, n, err)
		}
	}
	if got := cached(s.read); got != maxCachedStmts {
		t.Fatalf("%d statements cached, want the bound %d", got, maxCachedStmts)
	}
	// A failing text reports its error and is not cached.
	if _, err := s.read.QueryContext(ctx, `SELECT nope FROM nowhere`); err == nil {
		t.Fatal("a query of a missing table succeeded")
	}
	if err := s.read.QueryRowContext(ctx, `SELECT nope FROM nowhere`).Scan(new(int)); err == nil {
		t.Fatal("a query row of a missing table succeeded")
	}
}

// TestWriterTempStoreInMemory: the writer's statement journals stay in
// memory (drivers that take the pragma from the DSN); readers keep the
// default.
func TestWriterTempStoreInMemory(t *testing.T) {
	ctx := context.Background()
	for _, d := range Drivers() {
		if d == "mattn" {
			continue // no DSN key for temp_store
		}
		t.Run(d, func(t *testing.T) {
			s := openTemp(t, WithDriver(d))
			var w, r int
			if err := s.write.QueryRowContext(ctx, `PRAGMA temp_store`).Scan(&w); err != nil {
				t.Fatal(err)
			}
			if err := s.read.QueryRowContext(ctx, `PRAGMA temp_store`).Scan(&r); err != nil {
				t.Fatal(err)
			}
			if w != 2 || r != 0 {
				t.Fatalf("temp_store: writer %d, reader %d; want 2 (memory) and 0 (default)", w, r)
			}
		})
	}
}
