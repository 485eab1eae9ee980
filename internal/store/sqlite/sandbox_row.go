package sqlite

import (
	"bytes"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// sandboxCols is the column list scanSandbox reads, in order.
const sandboxCols = `id, tenant_id, driver, image, network, limits, sleep_after_ms, metadata,
	environment, session_key, handle, started_at, warmed_at, stopping_at, destroyed_at,
	generation, last_activity_at, version, created_at, updated_at, node`

func scanSandbox(r scanner) (*store.Sandbox, error) {
	var (
		sb                                      store.Sandbox
		limits, metadata, handle                sql.NullString
		started, warmed, stopping, destroyed    sql.NullInt64
		sleepMS, lastActivity, created, updated int64
	)
	err := r.Scan(&sb.ID, &sb.TenantID, &sb.Driver, &sb.Image, &sb.Network, &limits, &sleepMS, &metadata,
		&sb.Environment, &sb.SessionKey, &handle, &started, &warmed, &stopping, &destroyed,
		&sb.Generation, &lastActivity, &sb.Version, &created, &updated, &sb.Node)
	if err != nil {
		return nil, err
	}
	sb.Limits, sb.Handle = rawOrNil(limits), rawOrNil(handle)
	sb.SleepAfter = time.Duration(sleepMS) * time.Millisecond
	if sb.Metadata, err = decodeMap(metadata); err != nil {
		return nil, err
	}
	sb.StartedAt, sb.WarmedAt = timePtr(started), timePtr(warmed)
	sb.StoppingAt, sb.DestroyedAt = timePtr(stopping), timePtr(destroyed)
	sb.LastActivityAt = fromMicros(lastActivity)
	sb.CreatedAt, sb.UpdatedAt = fromMicros(created), fromMicros(updated)
	return &sb, nil
}

// sandboxArgs are a sandbox's validated JSON, duration and time arguments.
type sandboxArgs struct {
	limits, handle, metadata             sql.NullString
	sleepMS                              int64
	started, warmed, stopping, destroyed sql.NullInt64
}

// validateSandbox checks and encodes the fields a create or update writes.
// A JSON null Limits or Handle is stored as NULL and reads back nil: the
// sandbox layer tells "not started" by an empty Handle, so null must not
// look started. Empty Metadata is NULL too, as in the Postgres engine.
// SleepAfter keeps milliseconds, like the Postgres column.
func validateSandbox(sb *store.Sandbox) (sandboxArgs, error) {
	var (
		a   sandboxArgs
		err error
	)
	if sb.SleepAfter < 0 {
		return a, fmt.Errorf("sandbox %s: SleepAfter %s is negative: %w", sb.ID, sb.SleepAfter, store.ErrInvalid)
	}
	a.sleepMS = sb.SleepAfter.Milliseconds()
	if a.limits, err = jsonValue("sandbox "+sb.ID+": Limits", nullToNil(sb.Limits)); err != nil {
		return a, err
	}
	if a.handle, err = jsonValue("sandbox "+sb.ID+": Handle", nullToNil(sb.Handle)); err != nil {
		return a, err
	}
	if len(sb.Metadata) > 0 {
		a.metadata = encodeMap(sb.Metadata)
	}
	a.started, a.warmed = nullMicros(sb.StartedAt), nullMicros(sb.WarmedAt)
	a.stopping, a.destroyed = nullMicros(sb.StoppingAt), nullMicros(sb.DestroyedAt)
	return a, nil
}

// nullToNil maps a JSON null to a nil RawMessage (stored as NULL).
func nullToNil(raw json.RawMessage) json.RawMessage {
	if bytes.Equal(bytes.TrimSpace(raw), []byte("null")) {
		return nil
	}
	return raw
}

// backupCols is the column list scanBackup reads, in order.
const backupCols = `id, tenant_id, environment, session_key, sandbox_id, blob_key, size, sha256,
	stats, generation, created_at, expires_at`

func scanBackup(r scanner) (*store.Backup, error) {
	var (
		b                store.Backup
		stats            sql.NullString
		created, expires int64
	)
	if err := r.Scan(&b.ID, &b.TenantID, &b.Environment, &b.SessionKey, &b.SandboxID, &b.BlobKey,
		&b.Size, &b.SHA256, &stats, &b.Generation, &created, &expires); err != nil {
		return nil, err
	}
	b.Stats = rawOrNil(stats)
	b.CreatedAt, b.ExpiresAt = fromMicros(created), fromMicros(expires)
	return &b, nil
}

// collectBackups scans every row; an empty result is an empty slice.
func collectBackups(rows *sql.Rows) ([]*store.Backup, error) {
	defer rows.Close()
	out := []*store.Backup{}
	for rows.Next() {
		b, err := scanBackup(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, rows.Err()
}
