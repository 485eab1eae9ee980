package agentkernel_test

import (
	"testing"

	"github.com/agentkernel/agentkernel/internal/testenv"
)

// freshPostgres creates a database no other test uses, dropped at cleanup.
func freshPostgres(t *testing.T) string { return testenv.FreshPostgres(t, "akt") }
