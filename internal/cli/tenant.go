package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel"
)

func runTenant(ctx context.Context, m *Main, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: agentkernel tenant create|ls", errUsage)
	}
	switch args[0] {
	case "create":
		fs := m.newFlagSet("tenant create", "tenant create NAME")
		var cf clientFlags
		cf.register(fs)
		if err := parse(fs, args[1:]); err != nil {
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
		fmt.Fprintf(m.Stdout, "created tenant %s (%s)\n", t.ID, t.Name)
		return nil
	case "ls", "list":
		fs := m.newFlagSet("tenant ls", "tenant ls [--json]")
		var cf clientFlags
		cf.register(fs)
		if err := parse(fs, args[1:]); err != nil {
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
	return fmt.Errorf("%w: unknown subcommand %q (create, ls)", errUsage, args[0])
}
