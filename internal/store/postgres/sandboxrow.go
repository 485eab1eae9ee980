package postgres

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// sandboxCols is the column list scanSandbox reads, in order.
const sandboxCols = `id, tenant_id, driver, image, network, limits, sleep_after_ms, metadata,
	environment, session_key, handle, started_at, warmed_at, stopping_at, destroyed_at,
	generation, last_activity_at, version, created_at, updated_at, node`

func scanSandbox(row pgx.Row) (*store.Sandbox, error) {
	var (
		sb                       store.Sandbox
		sleepMS                  int64
		limits, metadata, handle []byte
	)
	err := row.Scan(&sb.ID, &sb.TenantID, &sb.Driver, &sb.Image, &sb.Network, &limits, &sleepMS, &metadata,
		&sb.Environment, &sb.SessionKey, &handle, &sb.StartedAt, &sb.WarmedAt, &sb.StoppingAt, &sb.DestroyedAt,
		&sb.Generation, &sb.LastActivityAt, &sb.Version, &sb.CreatedAt, &sb.UpdatedAt, &sb.Node)
	if err != nil {
		return nil, err
	}
	sb.Limits = rawOrNil(limits)
	sb.Handle = rawOrNil(handle)
	sb.SleepAfter = time.Duration(sleepMS) * time.Millisecond
	if sb.Metadata, err = decodeMetadata(metadata); err != nil {
		return nil, err
	}
	sb.StartedAt, sb.WarmedAt = utcPtr(sb.StartedAt), utcPtr(sb.WarmedAt)
	sb.StoppingAt, sb.DestroyedAt = utcPtr(sb.StoppingAt), utcPtr(sb.DestroyedAt)
	sb.LastActivityAt = sb.LastActivityAt.UTC()
	sb.CreatedAt, sb.UpdatedAt = sb.CreatedAt.UTC(), sb.UpdatedAt.UTC()
	return &sb, nil
}

// sandboxArgs are a sandbox's validated JSON and duration arguments.
type sandboxArgs struct {
	limits, handle, metadata any
	sleepMS                  int64
}

// validateSandbox checks the fields a create or update writes. A JSON null
// Limits or Handle is stored as NULL and reads back nil: the sandbox layer
// tells "not started" by an empty Handle, so null must not look started.
func validateSandbox(sb *store.Sandbox) (sandboxArgs, error) {
	var (
		a   sandboxArgs
		err error
	)
	if sb.SleepAfter < 0 {
		return a, fmt.Errorf("sandbox %s: SleepAfter %s is negative: %w", sb.ID, sb.SleepAfter, store.ErrInvalid)
	}
	a.sleepMS = sb.SleepAfter.Milliseconds()
	if a.limits, err = jsonArg("sandbox "+sb.ID+": Limits", nullToNil(sb.Limits)); err != nil {
		return a, err
	}
	if a.handle, err = jsonArg("sandbox "+sb.ID+": Handle", nullToNil(sb.Handle)); err != nil {
		return a, err
	}
	if a.metadata, err = metadataArg(sb.Metadata); err != nil {
		return a, fmt.Errorf("sandbox %s: Metadata: %w", sb.ID, err)
	}
	return a, nil
}

// backupCols is the column list scanBackup reads, in order.
const backupCols = `id, tenant_id, environment, session_key, sandbox_id, blob_key, size, sha256,
	stats, generation, created_at, expires_at`

func scanBackup(row pgx.Row) (*store.Backup, error) {
	var (
		b     store.Backup
		stats []byte
	)
	if err := row.Scan(&b.ID, &b.TenantID, &b.Environment, &b.SessionKey, &b.SandboxID, &b.BlobKey,
		&b.Size, &b.SHA256, &stats, &b.Generation, &b.CreatedAt, &b.ExpiresAt); err != nil {
		return nil, err
	}
	b.Stats = rawOrNil(stats)
	b.CreatedAt, b.ExpiresAt = b.CreatedAt.UTC(), b.ExpiresAt.UTC()
	return &b, nil
}

func collectBackups(rows pgx.Rows) ([]*store.Backup, error) {
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Backup, error) { return scanBackup(row) })
	if err != nil {
		return nil, err
	}
	if out == nil {
		out = []*store.Backup{}
	}
	return out, nil
}
