package postgres

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const (
	vaultCols      = `id, tenant_id, doc, archived_at, created_at, updated_at`
	credentialCols = `id, tenant_id, vault_id, kind, doc, secret, key_id, version, archived_at, created_at, updated_at`
)

func scanVault(row pgx.Row) (*store.Vault, error) {
	var (
		v   store.Vault
		doc []byte
	)
	if err := row.Scan(&v.ID, &v.TenantID, &doc, &v.ArchivedAt, &v.CreatedAt, &v.UpdatedAt); err != nil {
		return nil, err
	}
	v.Doc = rawOrNil(doc)
	v.ArchivedAt = utcPtr(v.ArchivedAt)
	v.CreatedAt, v.UpdatedAt = v.CreatedAt.UTC(), v.UpdatedAt.UTC()
	return &v, nil
}

func scanCredential(row pgx.Row) (*store.VaultCredential, error) {
	var (
		c   store.VaultCredential
		doc []byte
	)
	if err := row.Scan(&c.ID, &c.TenantID, &c.VaultID, &c.Kind, &doc, &c.Secret, &c.KeyID, &c.Version,
		&c.ArchivedAt, &c.CreatedAt, &c.UpdatedAt); err != nil {
		return nil, err
	}
	c.Doc = rawOrNil(doc)
	c.ArchivedAt = utcPtr(c.ArchivedAt)
	c.CreatedAt, c.UpdatedAt = c.CreatedAt.UTC(), c.UpdatedAt.UTC()
	return &c, nil
}

// CreateVault inserts a vault. Zero CreatedAt becomes now; zero UpdatedAt
// becomes CreatedAt.
func (s *Store) CreateVault(ctx context.Context, v *store.Vault) (*store.Vault, error) {
	in := *v
	if in.ID == "" {
		in.ID = ids.New("vlt")
	}
	doc, err := objectArg("vault "+in.ID+": Doc", in.Doc)
	if err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.clock()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	var out *store.Vault
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		out, err = scanVault(tx.QueryRow(ctx, `INSERT INTO vaults
			(id, tenant_id, doc, archived_at, created_at, updated_at) VALUES ($1, $2, $3, $4, $5, $6)
			RETURNING `+vaultCols, in.ID, in.TenantID, doc, in.ArchivedAt, in.CreatedAt, in.UpdatedAt))
		if err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("create vault %s: %w", in.ID, store.ErrAlreadyExists)
			}
			return mapErr("create vault "+in.ID, err)
		}
		return s.lifecycleWebhook(ctx, tx, out.TenantID, out.ID, store.WebhookVaultCreated, out.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetVault returns the vault or ErrNotFound.
func (s *Store) GetVault(ctx context.Context, id string) (*store.Vault, error) {
	v, err := scanVault(s.pool.QueryRow(ctx, `SELECT `+vaultCols+` FROM vaults WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("vault "+id, err)
	}
	return v, nil
}

// UpdateVault replaces the doc; an archived vault is read-only.
func (s *Store) UpdateVault(ctx context.Context, id string, doc json.RawMessage) (*store.Vault, error) {
	body, err := objectArg("vault "+id+": Doc", doc)
	if err != nil {
		return nil, err
	}
	out, err := scanVault(s.pool.QueryRow(ctx, `UPDATE vaults SET doc = $2, updated_at = $3
		WHERE id = $1 AND archived_at IS NULL RETURNING `+vaultCols, id, body, s.clock()))
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapErr("update vault "+id, err)
	}
	return nil, s.missingOrArchived(ctx, "vaults", "vault", id)
}

// missingOrArchived explains why an update of a live row matched nothing
// (rows are never un-archived, so one that exists now is archived).
func (s *Store) missingOrArchived(ctx context.Context, table, kind, id string) error {
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM `+table+` WHERE id = $1`, id).Scan(&n); err != nil {
		return mapErr("read "+kind+" "+id, err)
	}
	if n == 0 {
		return fmt.Errorf("%s %s: %w", kind, id, store.ErrNotFound)
	}
	return fmt.Errorf("%s %s is archived; archived %ss cannot be updated: %w", kind, id, kind, store.ErrConflict)
}

// ListVaults pages through a tenant's vaults by id.
func (s *Store) ListVaults(ctx context.Context, p store.ListResourcesParams) ([]*store.Vault, error) {
	where, tail, page := resourcePage(p, 3)
	rows, err := s.pool.Query(ctx, `SELECT `+vaultCols+` FROM vaults
		WHERE tenant_id = $1 AND ($2::boolean OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, mapErr("list vaults", err)
	}
	return collect(rows, "vaults", scanVault)
}

// ArchiveVault archives the vault and its credentials in one transaction.
func (s *Store) ArchiveVault(ctx context.Context, id string, at time.Time) (*store.Vault, error) {
	if at.IsZero() {
		at = s.clock()
	}
	var out *store.Vault
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var live bool
		if err := tx.QueryRow(ctx, `SELECT archived_at IS NULL FROM vaults WHERE id = $1 FOR UPDATE`, id).Scan(&live); err != nil {
			return mapErr("archive vault "+id, err)
		}
		v, err := scanVault(tx.QueryRow(ctx, `UPDATE vaults SET
			updated_at = CASE WHEN archived_at IS NULL THEN $2 ELSE updated_at END,
			archived_at = COALESCE(archived_at, $2)
			WHERE id = $1 RETURNING `+vaultCols, id, at))
		if err != nil {
			return mapErr("archive vault "+id, err)
		}
		creds, err := idsOf(tx.Query(ctx, `UPDATE vault_credentials SET archived_at = $2, updated_at = $2
			WHERE vault_id = $1 AND archived_at IS NULL RETURNING id`, id, at))
		if err != nil {
			return mapErr("archive the credentials of vault "+id, err)
		}
		out = v
		if err := s.credentialWebhooks(ctx, tx, v.TenantID, v.ID, store.WebhookVaultCredentialArchived, creds, at); err != nil {
			return err
		}
		if !live {
			return nil // archived before: announced then
		}
		return s.lifecycleWebhook(ctx, tx, v.TenantID, v.ID, store.WebhookVaultArchived, at)
	})
	return out, err
}

// DeleteVault removes the vault; its credentials go by cascade, each
// announced. The vault's row lock keeps a credential from being added
// between listing them and the delete.
func (s *Store) DeleteVault(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var tenant string
		err := tx.QueryRow(ctx, `SELECT tenant_id FROM vaults WHERE id = $1 FOR UPDATE`, id).Scan(&tenant)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("delete vault %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return mapErr("delete vault "+id, err)
		}
		creds, err := idsOf(tx.Query(ctx, `SELECT id FROM vault_credentials WHERE vault_id = $1 ORDER BY id COLLATE "C"`, id))
		if err != nil {
			return mapErr("read the credentials of vault "+id, err)
		}
		if _, err := tx.Exec(ctx, `DELETE FROM vaults WHERE id = $1`, id); err != nil {
			return mapErr("delete vault "+id, err)
		}
		at := s.clock()
		if err := s.credentialWebhooks(ctx, tx, tenant, id, store.WebhookVaultCredentialDeleted, creds, at); err != nil {
			return err
		}
		return s.lifecycleWebhook(ctx, tx, tenant, id, store.WebhookVaultDeleted, at)
	})
}

// idsOf reads a one-column result of ids.
func idsOf(rows pgx.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// CreateVaultCredential inserts a credential into a live vault.
func (s *Store) CreateVaultCredential(ctx context.Context, c *store.VaultCredential) (*store.VaultCredential, error) {
	in := *c
	if in.ID == "" {
		in.ID = ids.New("vcrd")
	}
	doc, err := objectArg("credential "+in.ID+": Doc", in.Doc)
	if err != nil {
		return nil, err
	}
	if in.Kind == "" || in.KeyID == "" || len(in.Secret) == 0 {
		return nil, fmt.Errorf("credential %s: Kind, KeyID and Secret are required: %w", in.ID, store.ErrInvalid)
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.clock()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	var out *store.VaultCredential
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		var archived *time.Time
		// FOR SHARE: an archive of the vault waits for this insert (and then
		// archives the new credential too).
		if err := tx.QueryRow(ctx, `SELECT archived_at FROM vaults WHERE id = $1 FOR SHARE`, in.VaultID).Scan(&archived); err != nil {
			return mapErr("vault "+in.VaultID, err)
		}
		if archived != nil {
			return fmt.Errorf("vault %s is archived; archived vaults take no new credentials: %w", in.VaultID, store.ErrConflict)
		}
		row, err := scanCredential(tx.QueryRow(ctx, `INSERT INTO vault_credentials
			(id, tenant_id, vault_id, kind, doc, secret, key_id, version, archived_at, created_at, updated_at)
			VALUES ($1, $2, $3, $4, $5, $6, $7, 1, $8, $9, $10) RETURNING `+credentialCols,
			in.ID, in.TenantID, in.VaultID, in.Kind, doc, in.Secret, in.KeyID, in.ArchivedAt, in.CreatedAt, in.UpdatedAt))
		if err != nil {
			if isUniqueViolation(err) {
				return fmt.Errorf("create credential %s: %w", in.ID, store.ErrAlreadyExists)
			}
			return mapErr("create credential "+in.ID, err)
		}
		out = row
		return s.credentialWebhooks(ctx, tx, row.TenantID, row.VaultID, store.WebhookVaultCredentialCreated, []string{row.ID}, row.CreatedAt)
	})
	return out, err
}

// GetVaultCredential returns the credential or ErrNotFound.
func (s *Store) GetVaultCredential(ctx context.Context, id string) (*store.VaultCredential, error) {
	c, err := scanCredential(s.pool.QueryRow(ctx, `SELECT `+credentialCols+` FROM vault_credentials WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("credential "+id, err)
	}
	return c, nil
}

// UpdateVaultCredential writes doc, secret and key id at c.Version.
func (s *Store) UpdateVaultCredential(ctx context.Context, c *store.VaultCredential) (*store.VaultCredential, error) {
	doc, err := objectArg("credential "+c.ID+": Doc", c.Doc)
	if err != nil {
		return nil, err
	}
	if c.KeyID == "" || len(c.Secret) == 0 {
		return nil, fmt.Errorf("credential %s: KeyID and Secret are required: %w", c.ID, store.ErrInvalid)
	}
	var out *store.VaultCredential
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		cur, err := scanCredential(tx.QueryRow(ctx, `SELECT `+credentialCols+` FROM vault_credentials WHERE id = $1 FOR UPDATE`, c.ID))
		if err != nil {
			return mapErr("credential "+c.ID, err)
		}
		if cur.ArchivedAt != nil {
			return fmt.Errorf("credential %s is archived; archived credentials cannot be updated: %w", c.ID, store.ErrConflict)
		}
		if cur.Version != c.Version {
			return fmt.Errorf("credential %s: expected version %d, stored %d: %w", c.ID, c.Version, cur.Version, store.ErrVersionMismatch)
		}
		row, err := scanCredential(tx.QueryRow(ctx, `UPDATE vault_credentials SET doc = $2, secret = $3, key_id = $4,
			version = version + 1, updated_at = $5 WHERE id = $1 RETURNING `+credentialCols,
			c.ID, doc, c.Secret, c.KeyID, s.clock()))
		if err != nil {
			return mapErr("update credential "+c.ID, err)
		}
		out = row
		return nil
	})
	return out, err
}

// RekeyVaultCredential replaces the sealed secret at expectedVersion.
func (s *Store) RekeyVaultCredential(ctx context.Context, id string, expectedVersion int64, secret []byte, keyID string) (*store.VaultCredential, error) {
	if keyID == "" || len(secret) == 0 {
		return nil, fmt.Errorf("credential %s: key id and secret are required: %w", id, store.ErrInvalid)
	}
	out, err := scanCredential(s.pool.QueryRow(ctx, `UPDATE vault_credentials SET secret = $3, key_id = $4,
		version = version + 1 WHERE id = $1 AND version = $2 RETURNING `+credentialCols, id, expectedVersion, secret, keyID))
	if err == nil {
		return out, nil
	}
	if !errors.Is(err, pgx.ErrNoRows) {
		return nil, mapErr("rekey credential "+id, err)
	}
	var n int
	if err := s.pool.QueryRow(ctx, `SELECT count(*) FROM vault_credentials WHERE id = $1`, id).Scan(&n); err != nil {
		return nil, mapErr("read credential "+id, err)
	}
	if n == 0 {
		return nil, fmt.Errorf("credential %s: %w", id, store.ErrNotFound)
	}
	return nil, fmt.Errorf("credential %s changed since version %d: %w", id, expectedVersion, store.ErrVersionMismatch)
}

// ListVaultCredentials pages through one vault's credentials by id.
func (s *Store) ListVaultCredentials(ctx context.Context, p store.ListResourcesParams) ([]*store.VaultCredential, error) {
	where, tail, page := resourcePage(p, 4)
	rows, err := s.pool.Query(ctx, `SELECT `+credentialCols+` FROM vault_credentials
		WHERE tenant_id = $1 AND vault_id = $2 AND ($3::boolean OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.VaultID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, mapErr("list credentials", err)
	}
	return collect(rows, "credentials", scanCredential)
}

// ListVaultCredentialsIn lists the live credentials of the given vaults.
func (s *Store) ListVaultCredentialsIn(ctx context.Context, tenantID string, vaultIDs []string) ([]*store.VaultCredential, error) {
	if len(vaultIDs) == 0 {
		return []*store.VaultCredential{}, nil
	}
	rows, err := s.pool.Query(ctx, `SELECT `+credentialCols+` FROM vault_credentials
		WHERE tenant_id = $1 AND archived_at IS NULL AND vault_id = ANY($2) ORDER BY id`, tenantID, vaultIDs)
	if err != nil {
		return nil, mapErr("list credentials of vaults", err)
	}
	out, err := collect(rows, "credentials", scanCredential)
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b *store.VaultCredential) int {
		return slices.Index(vaultIDs, a.VaultID) - slices.Index(vaultIDs, b.VaultID)
	})
	return out, nil
}

// ListCredentialsNotUnderKey pages through what a rotation must re-encrypt.
func (s *Store) ListCredentialsNotUnderKey(ctx context.Context, keyID, afterID string, limit int) ([]*store.VaultCredential, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+credentialCols+` FROM vault_credentials
		WHERE key_id <> $1 AND id > $2 ORDER BY id LIMIT $3`, keyID, afterID, lim)
	if err != nil {
		return nil, mapErr("list credentials to rekey", err)
	}
	return collect(rows, "credentials", scanCredential)
}

// ArchiveVaultCredential sets ArchivedAt; archiving twice keeps the first.
func (s *Store) ArchiveVaultCredential(ctx context.Context, id string, at time.Time) (*store.VaultCredential, error) {
	if at.IsZero() {
		at = s.clock()
	}
	var out *store.VaultCredential
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var live bool
		if err := tx.QueryRow(ctx, `SELECT archived_at IS NULL FROM vault_credentials WHERE id = $1 FOR UPDATE`, id).Scan(&live); err != nil {
			return mapErr("archive credential "+id, err)
		}
		c, err := scanCredential(tx.QueryRow(ctx, `UPDATE vault_credentials SET
			updated_at = CASE WHEN archived_at IS NULL THEN $2 ELSE updated_at END,
			archived_at = COALESCE(archived_at, $2)
			WHERE id = $1 RETURNING `+credentialCols, id, at))
		if err != nil {
			return mapErr("archive credential "+id, err)
		}
		out = c
		if !live {
			return nil // archived before: announced then
		}
		return s.credentialWebhooks(ctx, tx, c.TenantID, c.VaultID, store.WebhookVaultCredentialArchived, []string{c.ID}, at)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteVaultCredential removes the credential.
func (s *Store) DeleteVaultCredential(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var tenant, vaultID string
		err := tx.QueryRow(ctx, `DELETE FROM vault_credentials WHERE id = $1 RETURNING tenant_id, vault_id`, id).Scan(&tenant, &vaultID)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("delete credential %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return mapErr("delete credential "+id, err)
		}
		return s.credentialWebhooks(ctx, tx, tenant, vaultID, store.WebhookVaultCredentialDeleted, []string{id}, s.clock())
	})
}

// AnnounceCredentialRefreshFailed implements store.VaultStore.
func (s *Store) AnnounceCredentialRefreshFailed(ctx context.Context, id string, at time.Time) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var tenant, vaultID string
		err := tx.QueryRow(ctx, `SELECT tenant_id, vault_id FROM vault_credentials WHERE id = $1`, id).Scan(&tenant, &vaultID)
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("credential %s: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return mapErr("read credential "+id, err)
		}
		return s.credentialWebhooks(ctx, tx, tenant, vaultID, store.WebhookVaultCredentialRefreshFailed, []string{id}, at)
	})
}
