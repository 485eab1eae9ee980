package auth

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// DefaultTenantName is the tenant the first admin key belongs to.
const DefaultTenantName = "default"

// Bootstrap makes sure an admin key exists. On first start (no unrevoked
// admin key in the store) it creates the default tenant and an admin key and
// writes the secret with mode 0600 to keyPath, where the CLI and the SDK find
// it. It returns the new secret, or "" when nothing was created.
func Bootstrap(ctx context.Context, st store.Store, keyPath string, log *slog.Logger) (string, error) {
	n, err := st.CountAdminKeys(ctx)
	if err != nil {
		return "", fmt.Errorf("bootstrap: count admin keys: %w", err)
	}
	if n > 0 {
		if _, err := os.Stat(keyPath); err != nil {
			log.Warn("admin key file missing; create a key with an existing admin key", "path", keyPath)
		}
		return "", nil
	}
	tenant, err := st.GetTenantByName(ctx, DefaultTenantName)
	if errors.Is(err, store.ErrNotFound) {
		tenant, err = st.CreateTenant(ctx, store.Tenant{ID: ids.New("tnt"), Name: DefaultTenantName})
		if errors.Is(err, store.ErrAlreadyExists) { // another node won the race
			tenant, err = st.GetTenantByName(ctx, DefaultTenantName)
		}
	}
	if err != nil {
		return "", fmt.Errorf("bootstrap: default tenant: %w", err)
	}
	secret := NewSecret()
	// Write the file first: a key in the store that nobody can read is
	// useless, while a file without a stored key is simply retried.
	if err := writeKeyFile(keyPath, secret); err != nil {
		return "", fmt.Errorf("bootstrap: write %s: %w", keyPath, err)
	}
	if _, err := st.CreateAPIKey(ctx, store.CreateAPIKeyParams{
		ID: ids.New("key"), TenantID: tenant.ID, Name: "admin", Prefix: Prefix(secret), Hash: Hash(secret), Admin: true,
	}); err != nil {
		return "", fmt.Errorf("bootstrap: create admin key: %w", err)
	}
	log.Info("created admin key", "path", keyPath, "tenant", tenant.ID)
	return secret, nil
}

// writeKeyFile writes atomically with mode 0600.
func writeKeyFile(path, secret string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".admin.key.*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return err
	}
	if _, err := tmp.WriteString(secret + "\n"); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
