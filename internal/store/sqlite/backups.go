package sqlite

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// CreateBackup implements store.SandboxStore. Zero CreatedAt becomes now; a
// zero ExpiresAt is ErrInvalid, since a backup without a TTL would be
// reaped by the next sweep. ErrAlreadyExists on a taken id.
func (s *Store) CreateBackup(ctx context.Context, b *store.Backup) (*store.Backup, error) {
	in := *b
	if in.ID == "" {
		in.ID = ids.New("bkp")
	}
	if in.ExpiresAt.IsZero() {
		return nil, fmt.Errorf("backup %s: ExpiresAt is required: %w", in.ID, store.ErrInvalid)
	}
	stats, err := jsonValue("backup "+in.ID+": Stats", nullToNil(in.Stats))
	if err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	out, err := scanBackup(s.write.QueryRowContext(ctx, `INSERT INTO backups
		(id, tenant_id, environment, session_key, sandbox_id, blob_key, size, sha256,
		 stats, generation, created_at, expires_at)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (id) DO NOTHING RETURNING `+backupCols,
		in.ID, in.TenantID, in.Environment, in.SessionKey, in.SandboxID, in.BlobKey, in.Size, in.SHA256,
		stats, in.Generation, micros(in.CreatedAt), micros(in.ExpiresAt)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("backup %q: %w", in.ID, store.ErrAlreadyExists)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: create backup %q: %w", in.ID, err)
	}
	return out, nil
}

// GetBackup implements store.SandboxStore: expired or not, or ErrNotFound.
func (s *Store) GetBackup(ctx context.Context, id string) (*store.Backup, error) {
	b, err := scanBackup(s.read.QueryRowContext(ctx, `SELECT `+backupCols+` FROM backups WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("backup %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get backup %q: %w", id, err)
	}
	return b, nil
}

// LatestBackup implements store.SandboxStore: the key's backup with the
// greatest (CreatedAt, ID) among those with ExpiresAt after now.
func (s *Store) LatestBackup(ctx context.Context, key store.BackupKey, now time.Time) (*store.Backup, error) {
	b, err := scanBackup(s.read.QueryRowContext(ctx, `SELECT `+backupCols+` FROM backups
		WHERE tenant_id = ? AND environment = ? AND session_key = ? AND expires_at > ?
		ORDER BY created_at DESC, id DESC LIMIT 1`, key.TenantID, key.Environment, key.SessionKey, micros(now)))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("latest backup for tenant %q environment %q session key %q: %w",
			key.TenantID, key.Environment, key.SessionKey, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: latest backup: %w", err)
	}
	return b, nil
}

// ListBackups implements store.SandboxStore: every backup the sandbox made,
// expired but not yet reaped ones included, newest first by (CreatedAt, ID).
// An unknown or deleted sandbox has an empty list: backups outlive it.
func (s *Store) ListBackups(ctx context.Context, sandboxID string) ([]*store.Backup, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+backupCols+` FROM backups
		WHERE sandbox_id = ? ORDER BY created_at DESC, id DESC`, sandboxID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list backups of sandbox %q: %w", sandboxID, err)
	}
	out, err := collectBackups(rows)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list backups of sandbox %q: %w", sandboxID, err)
	}
	return out, nil
}

// DeleteExpiredBackups implements store.SandboxStore: it deletes and
// returns backups with ExpiresAt <= now, oldest first by (CreatedAt, ID).
// One DELETE … RETURNING in one write transaction: concurrent reapers queue
// on the write connection, so each row is deleted, and returned, once.
func (s *Store) DeleteExpiredBackups(ctx context.Context, now time.Time) ([]*store.Backup, error) {
	var out []*store.Backup
	err := s.inTx(ctx, func(tx *wtx) error {
		rows, err := tx.QueryContext(ctx, `DELETE FROM backups WHERE expires_at <= ? RETURNING `+backupCols, micros(now))
		if err != nil {
			return err
		}
		out, err = collectBackups(rows)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: delete expired backups: %w", err)
	}
	// RETURNING's order is unspecified in SQLite.
	slices.SortFunc(out, func(a, b *store.Backup) int {
		return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}
