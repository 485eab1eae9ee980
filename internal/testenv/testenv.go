// Package testenv is what tests know about the machine they run on and
// what they leave behind on it.
//
// A dependency that is missing (dockerd, PostgreSQL, bubblewrap, an
// interpreter) skips the test on a developer's machine and fails it in CI
// (CI=true): scripts/test.sh provides every dependency there, so a skip
// would only hide a test that never ran. Every such check calls Unavailable.
package testenv

import (
	"os"
	"os/exec"
	"strconv"
	"testing"
)

// PostgresURLEnv names the PostgreSQL server the Postgres variants use.
const PostgresURLEnv = "AGENTKERNEL_TEST_POSTGRES_URL"

// InCI reports whether the tests run in CI (CI=true, as CI systems set it).
func InCI() bool {
	v, _ := strconv.ParseBool(os.Getenv("CI"))
	return v
}

// Unavailable ends t because dep cannot be used here: a skip locally, a
// failure in CI. why says what is missing and how to provide it.
func Unavailable(t testing.TB, dep, why string) {
	t.Helper()
	if InCI() {
		t.Fatalf("%s is unavailable, and CI=true makes a missing dependency a failure, not a skip: %s", dep, why)
	}
	t.Skipf("%s is unavailable: %s", dep, why)
}

// PostgresURL returns the test PostgreSQL URL (AGENTKERNEL_TEST_POSTGRES_URL),
// or ends t through Unavailable when it is not set.
func PostgresURL(t testing.TB) string {
	t.Helper()
	u := os.Getenv(PostgresURLEnv)
	if u == "" {
		Unavailable(t, "PostgreSQL", PostgresURLEnv+" is not set; set it to a PostgreSQL URL "+
			"(e.g. postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable), or run scripts/test.sh, which starts one")
	}
	return u
}

// File returns path when it exists, or ends t through Unavailable; install
// says how to get it (e.g. "apt-get install -y python3").
func File(t testing.TB, path, install string) string {
	t.Helper()
	if _, err := os.Stat(path); err != nil {
		Unavailable(t, path, err.Error()+" ("+install+")")
	}
	return path
}

// Command returns the path of the program name on PATH, or ends t through
// Unavailable; install says how to get it.
func Command(t testing.TB, name, install string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		Unavailable(t, name, err.Error()+" ("+install+")")
	}
	return p
}
