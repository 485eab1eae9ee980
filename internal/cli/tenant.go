package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel"
)

func tenantCommand() command {
	return command{name: "tenant", summary: "tenants (admin)", subs: []command{
		{name: "create", summary: "create a tenant and print its id", run: tenantCreate},
		{name: "ls", aliases: []string{"list"}, summary: "list tenants", run: tenantList},
	}}
}

// tenantCreate prints the new tenant's id alone on stdout, so
// `tenant=$(agentkernel tenant create acme)` captures it.
func tenantCreate(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("tenant create", "tenant create NAME [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: tenant create takes one name", errUsage)
	}
	t, err := cf.client(m).Tenants.Create(ctx, agentkernel.TenantCreateParams{Name: fs.Arg(0)})
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, t)
	}
	fmt.Fprintf(m.Stderr, "created tenant %q\n", t.Name)
	fmt.Fprintln(m.Stdout, t.ID)
	return nil
}

func tenantList(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("tenant ls", "tenant ls [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	ts, err := cf.client(m).Tenants.List(ctx)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, ts)
	}
	rows := make([][]string, 0, len(ts))
	for _, t := range ts {
		rows = append(rows, []string{t.ID, t.Name, t.CreatedAt.Format(time.RFC3339)})
	}
	return table(m.Stdout, []string{"ID", "NAME", "CREATED"}, rows)
}
