package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const (
	vaultCols      = `id, tenant_id, doc, archived_at, created_at, updated_at`
	credentialCols = `id, tenant_id, vault_id, kind, doc, secret, key_id, version, archived_at, created_at, updated_at`
)

func scanVault(r scanner) (*store.Vault, error) {
	var (
		v                store.Vault
		doc              string
		archived         sql.NullInt64
		created, updated int64
	)
	if err := r.Scan(&v.ID, &v.TenantID, &doc, &archived, &created, &updated); err != nil {
		return nil, err
	}
	v.Doc = []byte(doc)
	v.ArchivedAt = timePtr(archived)
	v.CreatedAt, v.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &v, nil
}

func scanCredential(r scanner) (*store.VaultCredential, error) {
	var (
		c                store.VaultCredential
		doc              string
		archived         sql.NullInt64
		created, updated int64
	)
	if err := r.Scan(&c.ID, &c.TenantID, &c.VaultID, &c.Kind, &doc, &c.Secret, &c.KeyID, &c.Version,
		&archived, &created, &updated); err != nil {
		return nil, err
	}
	c.Doc = []byte(doc)
	c.ArchivedAt = timePtr(archived)
	c.CreatedAt, c.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &c, nil
}

// CreateVault implements store.VaultStore. Zero CreatedAt becomes now;
// zero UpdatedAt becomes CreatedAt.
func (s *Store) CreateVault(ctx context.Context, v *store.Vault) (*store.Vault, error) {
	in := *v
	if in.ID == "" {
		in.ID = ids.New("vlt")
	}
	doc, err := jsonObject("vault "+in.ID+": Doc", in.Doc, "{}")
	if err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	var out *store.Vault
	err = s.inTx(ctx, func(tx *wtx) error {
		out, err = scanVault(tx.QueryRowContext(ctx, `INSERT INTO vaults
			(id, tenant_id, doc, archived_at, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT DO NOTHING RETURNING `+vaultCols,
			in.ID, in.TenantID, doc, nullMicros(in.ArchivedAt), micros(in.CreatedAt), micros(in.UpdatedAt)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("vault %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: create vault %q: %w", in.ID, err)
		}
		return s.lifecycleWebhookTx(ctx, tx, out.TenantID, out.ID, store.WebhookVaultCreated, out.CreatedAt)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// GetVault implements store.VaultStore.
func (s *Store) GetVault(ctx context.Context, id string) (*store.Vault, error) {
	v, err := scanVault(s.read.QueryRowContext(ctx, `SELECT `+vaultCols+` FROM vaults WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("vault %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get vault %q: %w", id, err)
	}
	return v, nil
}

// UpdateVault implements store.VaultStore.
func (s *Store) UpdateVault(ctx context.Context, id string, doc json.RawMessage) (*store.Vault, error) {
	body, err := jsonObject("vault "+id+": Doc", doc, "{}")
	if err != nil {
		return nil, err
	}
	var out *store.Vault
	err = s.inTx(ctx, func(tx *wtx) error {
		row, err := scanVault(tx.QueryRowContext(ctx, `UPDATE vaults SET doc = ?, updated_at = ?
			WHERE id = ? AND archived_at IS NULL RETURNING `+vaultCols, body, micros(s.timestamp()), id))
		if err == nil {
			out = row
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: update vault %q: %w", id, err)
		}
		return s.missingOrArchived(ctx, tx, "vaults", "vault", id)
	})
	return out, err
}

// missingOrArchived explains why an update of a live row matched nothing.
func (s *Store) missingOrArchived(ctx context.Context, tx *wtx, table, kind, id string) error {
	var n int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM `+table+` WHERE id = ?`, id).Scan(&n); err != nil {
		return fmt.Errorf("sqlite: read %s %q: %w", kind, id, err)
	}
	if n == 0 {
		return fmt.Errorf("%s %q: %w", kind, id, store.ErrNotFound)
	}
	return fmt.Errorf("%s %q is archived; archived %ss cannot be updated: %w", kind, id, kind, store.ErrConflict)
}

// ListVaults implements store.VaultStore.
func (s *Store) ListVaults(ctx context.Context, p store.ListResourcesParams) ([]*store.Vault, error) {
	where, tail, page := resourcePage(p, 3)
	rows, err := s.read.QueryContext(ctx, `SELECT `+vaultCols+` FROM vaults
		WHERE tenant_id = ?1 AND (?2 OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list vaults: %w", err)
	}
	return collect(rows, "vaults", scanVault)
}

// ArchiveVault implements store.VaultStore.
func (s *Store) ArchiveVault(ctx context.Context, id string, at time.Time) (*store.Vault, error) {
	if at.IsZero() {
		at = s.timestamp()
	}
	var out *store.Vault
	err := s.inTx(ctx, func(tx *wtx) error {
		var live bool
		if err := tx.QueryRowContext(ctx, `SELECT archived_at IS NULL FROM vaults WHERE id = ?`, id).Scan(&live); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("vault %q: %w", id, store.ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("sqlite: read vault %q: %w", id, err)
		}
		v, err := scanVault(tx.QueryRowContext(ctx, `UPDATE vaults SET
			updated_at = CASE WHEN archived_at IS NULL THEN ?1 ELSE updated_at END,
			archived_at = COALESCE(archived_at, ?1)
			WHERE id = ?2 RETURNING `+vaultCols, micros(at), id))
		if err != nil {
			return fmt.Errorf("sqlite: archive vault %q: %w", id, err)
		}
		creds, err := idsOf(tx.QueryContext(ctx, `UPDATE vault_credentials SET archived_at = ?1, updated_at = ?1
			WHERE vault_id = ?2 AND archived_at IS NULL RETURNING id`, micros(at), id))
		if err != nil {
			return fmt.Errorf("sqlite: archive the credentials of vault %q: %w", id, err)
		}
		out = v
		if err := s.credentialWebhooksTx(ctx, tx, v.TenantID, v.ID, store.WebhookVaultCredentialArchived, creds, at); err != nil {
			return err
		}
		if !live {
			return nil // archived before: announced then
		}
		return s.lifecycleWebhookTx(ctx, tx, v.TenantID, v.ID, store.WebhookVaultArchived, at)
	})
	return out, err
}

// DeleteVault implements store.VaultStore (credentials go by cascade,
// each announced).
func (s *Store) DeleteVault(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *wtx) error {
		creds, err := idsOf(tx.QueryContext(ctx, `SELECT id FROM vault_credentials WHERE vault_id = ? ORDER BY id`, id))
		if err != nil {
			return fmt.Errorf("sqlite: read the credentials of vault %q: %w", id, err)
		}
		var tenant string
		err = tx.QueryRowContext(ctx, `DELETE FROM vaults WHERE id = ? RETURNING tenant_id`, id).Scan(&tenant)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("vault %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: delete vault %q: %w", id, err)
		}
		at := s.timestamp()
		if err := s.credentialWebhooksTx(ctx, tx, tenant, id, store.WebhookVaultCredentialDeleted, creds, at); err != nil {
			return err
		}
		return s.lifecycleWebhookTx(ctx, tx, tenant, id, store.WebhookVaultDeleted, at)
	})
}

// idsOf reads a one-column result of ids.
func idsOf(rows *sql.Rows, err error) ([]string, error) {
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// CreateVaultCredential implements store.VaultStore.
func (s *Store) CreateVaultCredential(ctx context.Context, c *store.VaultCredential) (*store.VaultCredential, error) {
	in := *c
	if in.ID == "" {
		in.ID = ids.New("vcrd")
	}
	doc, err := jsonObject("credential "+in.ID+": Doc", in.Doc, "{}")
	if err != nil {
		return nil, err
	}
	if in.Kind == "" || in.KeyID == "" || len(in.Secret) == 0 {
		return nil, fmt.Errorf("credential %q: Kind, KeyID and Secret are required: %w", in.ID, store.ErrInvalid)
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	if in.UpdatedAt.IsZero() {
		in.UpdatedAt = in.CreatedAt
	}
	var out *store.VaultCredential
	err = s.inTx(ctx, func(tx *wtx) error {
		var archived sql.NullInt64
		err := tx.QueryRowContext(ctx, `SELECT archived_at FROM vaults WHERE id = ?`, in.VaultID).Scan(&archived)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("vault %q: %w", in.VaultID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read vault %q: %w", in.VaultID, err)
		}
		if archived.Valid {
			return fmt.Errorf("vault %q is archived; archived vaults take no new credentials: %w", in.VaultID, store.ErrConflict)
		}
		row, err := scanCredential(tx.QueryRowContext(ctx, `INSERT INTO vault_credentials
			(id, tenant_id, vault_id, kind, doc, secret, key_id, version, archived_at, created_at, updated_at)
			VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING `+credentialCols,
			in.ID, in.TenantID, in.VaultID, in.Kind, doc, in.Secret, in.KeyID,
			nullMicros(in.ArchivedAt), micros(in.CreatedAt), micros(in.UpdatedAt)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("credential %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: create credential %q: %w", in.ID, err)
		}
		out = row
		return s.credentialWebhooksTx(ctx, tx, row.TenantID, row.VaultID, store.WebhookVaultCredentialCreated, []string{row.ID}, row.CreatedAt)
	})
	return out, err
}

// GetVaultCredential implements store.VaultStore.
func (s *Store) GetVaultCredential(ctx context.Context, id string) (*store.VaultCredential, error) {
	c, err := scanCredential(s.read.QueryRowContext(ctx, `SELECT `+credentialCols+` FROM vault_credentials WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("credential %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get credential %q: %w", id, err)
	}
	return c, nil
}

// UpdateVaultCredential implements store.VaultStore.
func (s *Store) UpdateVaultCredential(ctx context.Context, c *store.VaultCredential) (*store.VaultCredential, error) {
	doc, err := jsonObject("credential "+c.ID+": Doc", c.Doc, "{}")
	if err != nil {
		return nil, err
	}
	if c.KeyID == "" || len(c.Secret) == 0 {
		return nil, fmt.Errorf("credential %q: KeyID and Secret are required: %w", c.ID, store.ErrInvalid)
	}
	var out *store.VaultCredential
	err = s.inTx(ctx, func(tx *wtx) error {
		cur, err := scanCredential(tx.QueryRowContext(ctx, `SELECT `+credentialCols+` FROM vault_credentials WHERE id = ?`, c.ID))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("credential %q: %w", c.ID, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read credential %q: %w", c.ID, err)
		}
		if cur.ArchivedAt != nil {
			return fmt.Errorf("credential %q is archived; archived credentials cannot be updated: %w", c.ID, store.ErrConflict)
		}
		if cur.Version != c.Version {
			return fmt.Errorf("credential %q: expected version %d, stored %d: %w", c.ID, c.Version, cur.Version, store.ErrVersionMismatch)
		}
		row, err := scanCredential(tx.QueryRowContext(ctx, `UPDATE vault_credentials SET doc = ?, secret = ?, key_id = ?,
			version = version + 1, updated_at = ? WHERE id = ? RETURNING `+credentialCols,
			doc, c.Secret, c.KeyID, micros(s.timestamp()), c.ID))
		if err != nil {
			return fmt.Errorf("sqlite: update credential %q: %w", c.ID, err)
		}
		out = row
		return nil
	})
	return out, err
}

// RekeyVaultCredential implements store.VaultStore. updated_at stays: a
// rotation changes no field a client sees.
func (s *Store) RekeyVaultCredential(ctx context.Context, id string, expectedVersion int64, secret []byte, keyID string) (*store.VaultCredential, error) {
	if keyID == "" || len(secret) == 0 {
		return nil, fmt.Errorf("credential %q: key id and secret are required: %w", id, store.ErrInvalid)
	}
	var out *store.VaultCredential
	err := s.inTx(ctx, func(tx *wtx) error {
		row, err := scanCredential(tx.QueryRowContext(ctx, `UPDATE vault_credentials SET secret = ?, key_id = ?,
			version = version + 1 WHERE id = ? AND version = ? RETURNING `+credentialCols, secret, keyID, id, expectedVersion))
		if err == nil {
			out = row
			return nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("sqlite: rekey credential %q: %w", id, err)
		}
		var n int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM vault_credentials WHERE id = ?`, id).Scan(&n); err != nil {
			return fmt.Errorf("sqlite: read credential %q: %w", id, err)
		}
		if n == 0 {
			return fmt.Errorf("credential %q: %w", id, store.ErrNotFound)
		}
		return fmt.Errorf("credential %q changed since version %d: %w", id, expectedVersion, store.ErrVersionMismatch)
	})
	return out, err
}

// ListVaultCredentials implements store.VaultStore.
func (s *Store) ListVaultCredentials(ctx context.Context, p store.ListResourcesParams) ([]*store.VaultCredential, error) {
	where, tail, page := resourcePage(p, 4)
	rows, err := s.read.QueryContext(ctx, `SELECT `+credentialCols+` FROM vault_credentials
		WHERE tenant_id = ?1 AND vault_id = ?2 AND (?3 OR archived_at IS NULL)`+where+tail,
		append([]any{p.TenantID, p.VaultID, p.IncludeArchived}, page...)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list credentials: %w", err)
	}
	return collect(rows, "credentials", scanCredential)
}

// ListVaultCredentialsIn implements store.VaultStore.
func (s *Store) ListVaultCredentialsIn(ctx context.Context, tenantID string, vaultIDs []string) ([]*store.VaultCredential, error) {
	if len(vaultIDs) == 0 {
		return []*store.VaultCredential{}, nil
	}
	args := []any{tenantID}
	for _, id := range vaultIDs {
		args = append(args, id)
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+credentialCols+` FROM vault_credentials
		WHERE tenant_id = ? AND archived_at IS NULL AND vault_id IN (?`+strings.Repeat(", ?", len(vaultIDs)-1)+`) ORDER BY id`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list credentials of vaults: %w", err)
	}
	out, err := collect(rows, "credentials", scanCredential)
	if err != nil {
		return nil, err
	}
	sortByVault(out, vaultIDs)
	return out, nil
}

// sortByVault orders credentials by their vault's place in vaultIDs,
// keeping id order within a vault.
func sortByVault(cs []*store.VaultCredential, vaultIDs []string) {
	slices.SortStableFunc(cs, func(a, b *store.VaultCredential) int {
		return slices.Index(vaultIDs, a.VaultID) - slices.Index(vaultIDs, b.VaultID)
	})
}

// ListCredentialsNotUnderKey implements store.VaultStore.
func (s *Store) ListCredentialsNotUnderKey(ctx context.Context, keyID, afterID string, limit int) ([]*store.VaultCredential, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+credentialCols+` FROM vault_credentials
		WHERE key_id <> ? AND id > ? ORDER BY id LIMIT ?`, keyID, afterID, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list credentials to rekey: %w", err)
	}
	return collect(rows, "credentials", scanCredential)
}

// ArchiveVaultCredential implements store.VaultStore.
func (s *Store) ArchiveVaultCredential(ctx context.Context, id string, at time.Time) (*store.VaultCredential, error) {
	if at.IsZero() {
		at = s.timestamp()
	}
	var out *store.VaultCredential
	err := s.inTx(ctx, func(tx *wtx) error {
		var live bool
		if err := tx.QueryRowContext(ctx, `SELECT archived_at IS NULL FROM vault_credentials WHERE id = ?`, id).Scan(&live); errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("credential %q: %w", id, store.ErrNotFound)
		} else if err != nil {
			return fmt.Errorf("sqlite: read credential %q: %w", id, err)
		}
		c, err := scanCredential(tx.QueryRowContext(ctx, `UPDATE vault_credentials SET
			updated_at = CASE WHEN archived_at IS NULL THEN ?1 ELSE updated_at END,
			archived_at = COALESCE(archived_at, ?1)
			WHERE id = ?2 RETURNING `+credentialCols, micros(at), id))
		if err != nil {
			return fmt.Errorf("sqlite: archive credential %q: %w", id, err)
		}
		out = c
		if !live {
			return nil // archived before: announced then
		}
		return s.credentialWebhooksTx(ctx, tx, c.TenantID, c.VaultID, store.WebhookVaultCredentialArchived, []string{c.ID}, at)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// DeleteVaultCredential implements store.VaultStore.
func (s *Store) DeleteVaultCredential(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *wtx) error {
		var tenant, vaultID string
		err := tx.QueryRowContext(ctx, `DELETE FROM vault_credentials WHERE id = ? RETURNING tenant_id, vault_id`, id).Scan(&tenant, &vaultID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("credential %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: delete credential %q: %w", id, err)
		}
		return s.credentialWebhooksTx(ctx, tx, tenant, vaultID, store.WebhookVaultCredentialDeleted, []string{id}, s.timestamp())
	})
}

// AnnounceCredentialRefreshFailed implements store.VaultStore.
func (s *Store) AnnounceCredentialRefreshFailed(ctx context.Context, id string, at time.Time) error {
	return s.inTx(ctx, func(tx *wtx) error {
		var tenant, vaultID string
		err := tx.QueryRowContext(ctx, `SELECT tenant_id, vault_id FROM vault_credentials WHERE id = ?`, id).Scan(&tenant, &vaultID)
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("credential %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: read credential %q: %w", id, err)
		}
		return s.credentialWebhooksTx(ctx, tx, tenant, vaultID, store.WebhookVaultCredentialRefreshFailed, []string{id}, at)
	})
}
