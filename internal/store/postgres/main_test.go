package postgres

import (
	"testing"

	"go.uber.org/goleak"
)

// pgxpool runs health-check and connection goroutines; every test must close
// its store.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
