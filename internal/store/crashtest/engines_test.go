package crashtest

import (
	"context"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
	"github.com/agentkernel/agentkernel/internal/store/postgres"
	"github.com/agentkernel/agentkernel/internal/store/sqlite"
)

// engine says how to open one engine's store; the parent passes it to the
// child through the environment.
type engine struct {
	name   string // "sqlite" or "postgres"
	dsn    string // SQLite file path or Postgres URL
	schema string // Postgres only: a schema no other run uses
	admin  string // Postgres only: the URL without the run's application name
}

func (e engine) open(ctx context.Context) (store.Store, error) {
	switch e.name {
	case "sqlite":
		return sqlite.Open(ctx, e.dsn)
	case "postgres":
		return postgres.Open(ctx, e.dsn, postgres.WithSchema(e.schema))
	}
	return nil, fmt.Errorf("unknown engine %q", e.name)
}
