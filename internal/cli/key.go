package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel"
)

func runKey(ctx context.Context, m *Main, args []string) error {
	if len(args) == 0 {
		return fmt.Errorf("%w: agentkernel key create|ls|revoke", errUsage)
	}
	switch args[0] {
	case "create":
		return keyCreate(ctx, m, args[1:])
	case "ls", "list":
		return keyList(ctx, m, args[1:])
	case "revoke", "rm":
		return keyRevoke(ctx, m, args[1:])
	}
	return fmt.Errorf("%w: unknown subcommand %q (create, ls, revoke)", errUsage, args[0])
}

func keyCreate(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("key create", "key create --name NAME [--tenant ID] [--admin]")
	var cf clientFlags
	cf.register(fs)
	var p agentkernel.KeyCreateParams
	fs.StringVar(&p.Name, "name", "", "a name for the key (required)")
	fs.StringVar(&p.TenantID, "tenant", "", "tenant id (default: the caller's tenant)")
	fs.BoolVar(&p.Admin, "admin", false, "make an admin key")
	if err := parse(fs, args); err != nil {
		return err
	}
	if p.Name == "" {
		return fmt.Errorf("%w: --name is required", errUsage)
	}
	k, err := cf.client(m).Keys.Create(ctx, p)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, k)
	}
	fmt.Fprintf(m.Stdout, "created key %s (tenant %s)\n%s\n", k.ID, k.TenantID, k.Secret)
	fmt.Fprintln(m.Stderr, "the secret is shown only once; store it now")
	return nil
}

func keyList(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("key ls", "key ls [--json]")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	keys, err := cf.client(m).Keys.List(ctx)
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, keys)
	}
	rows := make([][]string, 0, len(keys))
	for _, k := range keys {
		state := "active"
		if k.RevokedAt != nil {
			state = "revoked"
		}
		rows = append(rows, []string{k.ID, k.Name, k.TenantID, k.Prefix + "…", yesNo(k.Admin), state, k.CreatedAt.Format(time.RFC3339)})
	}
	return table(m.Stdout, []string{"ID", "NAME", "TENANT", "PREFIX", "ADMIN", "STATE", "CREATED"}, rows)
}

func keyRevoke(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("key revoke", "key revoke KEY_ID")
	var cf clientFlags
	cf.register(fs)
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return fmt.Errorf("%w: key revoke takes one key id", errUsage)
	}
	k, err := cf.client(m).Keys.Revoke(ctx, fs.Arg(0))
	if err != nil {
		return err
	}
	if cf.json {
		return printJSON(m.Stdout, k)
	}
	fmt.Fprintf(m.Stdout, "revoked %s\n", k.ID)
	return nil
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
