package sqlite

import (
	"errors"
	"fmt"
	"net/url"

	"github.com/agentkernel/agentkernel/internal/store"
)

// driver adapts one database/sql SQLite driver: its registered name, how it
// takes pragmas in the DSN, and how to read SQLite's extended result code
// from its errors. Which drivers are compiled in, and which is the default,
// is decided by build constraints (see availableDrivers); the contract
// suite and the benchmark run on every compiled-in driver.
type driver struct {
	label string // what WithDriver takes: "mattn", "modernc", "ncruces"
	name  string // the database/sql driver name
	// pragmaDSN renders pragmas the way the driver reads them from the DSN.
	pragmaDSN func(q url.Values, p []pragma)
	// code returns the SQLite extended result code carried by err.
	code func(err error) (int, bool)
}

type pragma struct{ name, value string }

// dsn builds a file: URI. Write connections begin IMMEDIATE so a
// read-then-write transaction takes the write lock up front and cannot fail
// with SQLITE_BUSY_SNAPSHOT when another process writes in between.
func (d driver) dsn(path string, p []pragma, write bool) string {
	q := url.Values{}
	d.pragmaDSN(q, p)
	if write {
		q.Set("_txlock", "immediate")
	}
	return "file:" + path + "?" + q.Encode()
}

// underscorePragmas is the `_pragma=name(value)` form of modernc and ncruces.
func underscorePragmas(q url.Values, p []pragma) {
	for _, pr := range p {
		q.Add("_pragma", pr.name+"("+pr.value+")")
	}
}

// SQLite extended result codes the store maps to sentinels.
const (
	codeConstraintForeignKey = 787
	codeConstraintPrimaryKey = 1555
	codeConstraintUnique     = 2067
)

func (d driver) isUnique(err error) bool {
	c, ok := d.code(err)
	return ok && (c == codeConstraintUnique || c == codeConstraintPrimaryKey)
}

func (d driver) isForeignKey(err error) bool {
	c, ok := d.code(err)
	return ok && c == codeConstraintForeignKey
}

// mapConstraint maps a constraint failure that no caller mapped more
// precisely: a uniqueness violation is ErrConflict, a missing referenced row
// ErrNotFound. Other errors pass through.
func (d driver) mapConstraint(err error) error {
	switch {
	case err == nil:
		return nil
	case d.isUnique(err):
		return fmt.Errorf("%w: %v", store.ErrConflict, err)
	case d.isForeignKey(err):
		return fmt.Errorf("referenced row missing: %w: %v", store.ErrNotFound, err)
	}
	return err
}

// codeFrom digs the first error in err's chain that has a code.
func codeFrom[T any](err error, get func(T) int) (int, bool) {
	var e T
	if errors.As(err, &e) {
		return get(e), true
	}
	return 0, false
}
