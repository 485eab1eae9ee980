package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

// CreateBackup records a verified snapshot. Zero CreatedAt becomes now; a
// zero ExpiresAt is ErrInvalid, since a backup without a TTL would be
// reaped by the next sweep. ErrAlreadyExists on a duplicate id.
func (s *Store) CreateBackup(ctx context.Context, b *store.Backup) (*store.Backup, error) {
	in := *b
	if in.ID == "" {
		in.ID = ids.New("bkp")
	}
	if in.ExpiresAt.IsZero() {
		return nil, fmt.Errorf("create backup %s: ExpiresAt is required: %w", in.ID, store.ErrInvalid)
	}
	stats, err := jsonArg("backup "+in.ID+": Stats", nullToNil(in.Stats))
	if err != nil {
		return nil, err
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.clock()
	}
	out, err := scanBackup(s.pool.QueryRow(ctx, `INSERT INTO backups
		(id, tenant_id, environment, session_key, sandbox_id, blob_key, size, sha256,
		 stats, generation, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
		RETURNING `+backupCols,
		in.ID, in.TenantID, in.Environment, in.SessionKey, in.SandboxID, in.BlobKey, in.Size, in.SHA256,
		stats, in.Generation, in.CreatedAt, in.ExpiresAt))
	if err != nil {
		if isUniqueViolation(err) {
			return nil, fmt.Errorf("create backup %s: %w", in.ID, store.ErrAlreadyExists)
		}
		return nil, mapErr(fmt.Sprintf("create backup %s", in.ID), err)
	}
	return out, nil
}

// GetBackup returns a backup, expired or not, or ErrNotFound.
func (s *Store) GetBackup(ctx context.Context, id string) (*store.Backup, error) {
	b, err := scanBackup(s.pool.QueryRow(ctx, "SELECT "+backupCols+" FROM backups WHERE id = $1", id))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("backup %s", id), err)
	}
	return b, nil
}

// LatestBackup returns the key's backup with the greatest (CreatedAt, ID)
// among those with ExpiresAt after now.
func (s *Store) LatestBackup(ctx context.Context, key store.BackupKey, now time.Time) (*store.Backup, error) {
	b, err := scanBackup(s.pool.QueryRow(ctx, "SELECT "+backupCols+` FROM backups
		WHERE tenant_id = $1 AND environment = $2 AND session_key = $3 AND expires_at > $4
		ORDER BY created_at DESC, id DESC LIMIT 1`, key.TenantID, key.Environment, key.SessionKey, now))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("latest backup for tenant %q environment %q session key %q",
			key.TenantID, key.Environment, key.SessionKey), err)
	}
	return b, nil
}

// ListBackups lists every backup a sandbox made, expired but not yet reaped
// ones included, newest first by (CreatedAt, ID). An unknown sandbox (or one
// already deleted) has an empty list, not ErrNotFound: its backups outlive it.
func (s *Store) ListBackups(ctx context.Context, sandboxID string) ([]*store.Backup, error) {
	rows, err := s.pool.Query(ctx, "SELECT "+backupCols+` FROM backups
		WHERE sandbox_id = $1 ORDER BY created_at DESC, id DESC`, sandboxID)
	if err != nil {
		return nil, mapErr(fmt.Sprintf("list backups of sandbox %s", sandboxID), err)
	}
	out, err := collectBackups(rows)
	return out, mapErr(fmt.Sprintf("list backups of sandbox %s", sandboxID), err)
}

// DeleteExpiredBackups deletes and returns backups with ExpiresAt <= now,
// oldest first by (CreatedAt, ID). SKIP LOCKED splits the rows between
// concurrent reapers without waits or deadlocks: each row is deleted, and
// returned, by exactly one of them.
func (s *Store) DeleteExpiredBackups(ctx context.Context, now time.Time) ([]*store.Backup, error) {
	rows, err := s.pool.Query(ctx, `WITH d AS (
		DELETE FROM backups WHERE id IN (
			SELECT id FROM backups WHERE expires_at <= $1 ORDER BY id FOR UPDATE SKIP LOCKED)
		RETURNING `+backupCols+`)
		SELECT `+backupCols+` FROM d ORDER BY created_at, id`, now)
	if err != nil {
		return nil, mapErr("delete expired backups", err)
	}
	out, err := collectBackups(rows)
	return out, mapErr("delete expired backups", err)
}
