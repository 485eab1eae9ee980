//go:build sqlite_ncruces && !sqlite_mattn

package sqlite

import (
	nsqlite3 "github.com/ncruces/go-sqlite3"
	_ "github.com/ncruces/go-sqlite3/driver" // registers "sqlite3"
	_ "github.com/ncruces/go-sqlite3/embed"  // the SQLite wasm build
)

// ncrucesDriver is github.com/ncruces/go-sqlite3: SQLite compiled to wasm and
// run by wazero. Only built with -tags sqlite_ncruces (for the driver
// comparison); it registers "sqlite3" like mattn, so the two exclude each
// other.
func ncrucesDriver() driver {
	return driver{
		label:     "ncruces",
		name:      "sqlite3",
		pragmaDSN: underscorePragmas,
		code: func(err error) (int, bool) {
			return codeFrom(err, func(e *nsqlite3.Error) int { return int(e.ExtendedCode()) })
		},
	}
}

// availableDrivers with -tags sqlite_ncruces: the default first, then ncruces.
func availableDrivers() []driver { return []driver{moderncDriver(), ncrucesDriver()} }
