//go:build !sqlite_mattn && !sqlite_ncruces

package sqlite

// availableDrivers lists the compiled-in drivers, default first. The others
// (mattn, ncruces) are build-tagged in only to compare them; see
// BenchmarkStore.
func availableDrivers() []driver { return []driver{moderncDriver()} }
