package sqlite

import (
	msqlite "modernc.org/sqlite"
)

// moderncDriver is modernc.org/sqlite: SQLite translated to pure Go, the
// default. On the store's own benchmark (storetest.Benchmark) it is within
// 10-30% of mattn's cgo driver and 2-3x faster than ncruces' wasm build,
// and it keeps the daemon a static CGO_ENABLED=0 binary with no C
// toolchain in the build.
func moderncDriver() driver {
	return driver{
		label:     "modernc",
		name:      "sqlite",
		pragmaDSN: underscorePragmas,
		code: func(err error) (int, bool) {
			return codeFrom(err, func(e *msqlite.Error) int { return e.Code() })
		},
	}
}
