//go:build sqlite_mattn

package sqlite

import (
	"net/url"

	msqlite3 "github.com/mattn/go-sqlite3"
)

// mattnDriver is github.com/mattn/go-sqlite3: the SQLite C library via cgo.
// Only built with -tags sqlite_mattn (needs cgo), for the driver comparison.
func mattnDriver() driver {
	return driver{
		label: "mattn",
		name:  "sqlite3",
		pragmaDSN: func(q url.Values, p []pragma) {
			for _, pr := range p {
				q.Set("_"+pr.name, pr.value)
			}
		},
		code: func(err error) (int, bool) {
			return codeFrom(err, func(e msqlite3.Error) int { return int(e.ExtendedCode) })
		},
	}
}

// availableDrivers with -tags sqlite_mattn: the default first, then mattn.
func availableDrivers() []driver { return []driver{moderncDriver(), mattnDriver()} }
