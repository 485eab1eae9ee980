package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon"
	"github.com/agentkernel/agentkernel/internal/vault"
)

func vaultCommand() command {
	return command{name: "vault", summary: "vault keys (operator; runs on the daemon's host)", subs: []command{
		{name: "rotate-key", summary: "add a new vault key and re-encrypt every credential and repository token with it", run: vaultRotateKey},
	}}
}

// vaultRotateKey opens the configuration and the store directly (it works
// with the daemon running or stopped): it adds a key, makes it current,
// re-encrypts every credential and every session resource's repository
// token under it, and with --drop-old removes the older keys once nothing
// is sealed with them. Killed halfway, it loses
// nothing (the old keys still open what they sealed); run it again.
func vaultRotateKey(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("vault rotate-key", "vault rotate-key [--config FILE] [--home DIR] [--drop-old] [--no-new-key]\n\n"+
		"Adds a new current key to the vault key file, re-encrypts every credential and every session resource's\n"+
		"repository token with it and reports the counts.\n"+
		"Old keys stay in the file (a running daemon and an interrupted rotation still need them) until --drop-old,\n"+
		"which removes them only after everything is re-encrypted. --no-new-key finishes an interrupted rotation\n"+
		"with the current key.")
	var flags config.Flags
	fs.StringVar(&flags.ConfigPath, "config", "", "configuration file (as for serve)")
	fs.StringVar(&flags.Home, "home", "", "data directory (as for serve; env AGENTKERNEL_HOME)")
	dropOld := fs.Bool("drop-old", false, "after re-encrypting, remove every key but the current one")
	noNew := fs.Bool("no-new-key", false, "re-encrypt with the current key instead of adding one")
	if err := parse(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: unexpected argument %q", errUsage, fs.Arg(0))
	}
	cfg, _, err := config.Load(flags, m.Environ)
	if err != nil {
		return err
	}
	keys, err := vault.OpenKeyring(cfg.VaultKeyFile())
	if err != nil {
		return err
	}
	st, err := daemon.OpenStore(ctx, cfg)
	if err != nil {
		return err
	}
	defer st.Close()
	svc := vault.New(vault.Config{Store: st, Resources: st, Keys: keys})
	if !*noNew {
		id, err := keys.AddKey()
		if err != nil {
			return err
		}
		fmt.Fprintf(m.Stdout, "added key %s to %s; it seals every new secret from now on\n", id, keys.Path())
	}
	rep, err := svc.Rekey(ctx, rekeyHook(cfg.Home))
	if err != nil {
		return fmt.Errorf("re-encrypted %d credentials and %d session resource tokens, then: %w (old keys are kept; run vault rotate-key --no-new-key to finish)", rep.Reencrypted, rep.Resources, err)
	}
	fmt.Fprintf(m.Stdout, "re-encrypted %d credentials with key %s", rep.Reencrypted, rep.Key)
	if rep.Gone > 0 {
		fmt.Fprintf(m.Stdout, " (%d deleted meanwhile)", rep.Gone)
	}
	fmt.Fprintln(m.Stdout)
	fmt.Fprintf(m.Stdout, "re-encrypted %d session resource tokens with key %s\n", rep.Resources, rep.Key)
	left, err := svc.StillUnder(ctx)
	if err != nil {
		return err
	}
	var old []string
	for _, id := range keys.KeyIDs() {
		if id != rep.Key {
			old = append(old, id)
		}
	}
	switch {
	case len(old) == 0:
		return nil
	case left > 0:
		return fmt.Errorf("%d credentials or session resource tokens are still sealed with an old key; run vault rotate-key --no-new-key", left)
	case !*dropOld:
		fmt.Fprintf(m.Stdout, "old keys kept in %s: %s (remove them with vault rotate-key --no-new-key --drop-old)\n", keys.Path(), strings.Join(old, ", "))
		return nil
	}
	dropped, err := keys.DropOld()
	if err != nil {
		return err
	}
	fmt.Fprintf(m.Stdout, "dropped old keys: %s\n", strings.Join(dropped, ", "))
	return nil
}
