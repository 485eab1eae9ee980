package cli

import (
	"context"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel"
)

func keyCommand() command {
	return command{name: "key", summary: "API keys (admin; a tenant key makes environment keys)", subs: []command{
		{name: "create", summary: "create a key and print its secret (shown once)", run: keyCreate},
		{name: "ls", aliases: []string{"list"}, summary: "list keys", run: keyList},
		{name: "revoke", aliases: []string{"rm"}, summary: "revoke a key", run: keyRevoke},
	}}
}

// keyCreate prints the secret alone on stdout; --json prints the whole key
// (id, tenant and secret).
func keyCreate(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("key create", "key create --name NAME [--tenant ID] [--admin | --environment ENV_ID] [--json]\n\nPrints the secret alone on stdout (shown only once); the key's id goes to stderr. --json prints both.\n--environment makes an environment key: the credential of a self_hosted environment's workers, which reaches that environment's work queue and its sessions' events only.")
	var cf clientFlags
	cf.register(fs)
	var p agentkernel.KeyCreateParams
	fs.StringVar(&p.Name, "name", "", "a name for the key (required)")
	fs.StringVar(&p.TenantID, "tenant", "", "tenant id (default: the caller's tenant)")
	fs.BoolVar(&p.Admin, "admin", false, "make an admin key")
	fs.StringVar(&p.EnvironmentID, "environment", "", "make an environment key of this self_hosted environment (env_…)")
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
	// The secret is what a script needs (`key=$(agentkernel key create …)`);
	// the id, for `key revoke`, and the warning go to stderr.
	scope := "tenant " + k.TenantID
	if k.EnvironmentID != nil {
		scope = "environment " + *k.EnvironmentID + " of tenant " + k.TenantID
	}
	fmt.Fprintf(m.Stderr, "created key %s (%s); the secret below is shown only once: store it now\n", k.ID, scope)
	fmt.Fprintln(m.Stdout, k.Secret)
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
		env := "-"
		if k.EnvironmentID != nil {
			env = *k.EnvironmentID
		}
		rows = append(rows, []string{k.ID, k.Name, k.TenantID, env, k.Prefix + "…", yesNo(k.Admin), state, k.CreatedAt.Format(time.RFC3339)})
	}
	return table(m.Stdout, []string{"ID", "NAME", "TENANT", "ENVIRONMENT", "PREFIX", "ADMIN", "STATE", "CREATED"}, rows)
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
