package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const alarmCols = `id, tenant_id, class, object_id, method, args, fire_at, fired, attempts, last_error,
	created_at, updated_at`

// scanAlarm reads alarmCols. Alarm.ID is the alarm's id; the object's id is
// Alarm.ObjectKey.ID (the embedded field is shadowed).
func scanAlarm(r scanner) (*store.Alarm, error) {
	var (
		a                        store.Alarm
		args                     sql.NullString
		fireAt, created, updated int64
	)
	if err := r.Scan(&a.ID, &a.TenantID, &a.Class, &a.ObjectKey.ID, &a.Method, &args, &fireAt, &a.Fired,
		&a.Attempts, &a.LastError, &created, &updated); err != nil {
		return nil, err
	}
	a.Args = rawOrNil(args)
	a.FireAt, a.CreatedAt, a.UpdatedAt = fromMicros(fireAt), fromMicros(created), fromMicros(updated)
	return &a, nil
}

func scanAlarms(rows *sql.Rows) ([]*store.Alarm, error) {
	defer rows.Close()
	out := []*store.Alarm{}
	for rows.Next() {
		a, err := scanAlarm(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan alarm: %w", err)
		}
		out = append(out, a)
	}
	return out, rows.Err()
}

// SetAlarm implements store.ObjectStore: the object must exist; its pending
// alarm for the same method is deleted and the new one inserted in one
// transaction (the partial unique index makes a second pending alarm
// impossible anyway). A fired alarm is history and stays. The new alarm
// starts unfired with no attempts, whatever the caller sent.
func (s *Store) SetAlarm(ctx context.Context, a *store.Alarm) (*store.Alarm, error) {
	if a == nil {
		return nil, fmt.Errorf("alarm is required: %w", store.ErrInvalid)
	}
	if err := requireObjectKey(a.ObjectKey); err != nil {
		return nil, err
	}
	if a.Method == "" || a.FireAt.IsZero() {
		return nil, fmt.Errorf("alarm on %q: method and fire time are required: %w", keyName(a.ObjectKey), store.ErrInvalid)
	}
	args, err := jsonValue("alarm args", a.Args)
	if err != nil {
		return nil, err
	}
	id := a.ID
	if id == "" {
		id = ids.New("alm")
	}
	now := micros(s.timestamp())
	var out *store.Alarm
	err = s.inTx(ctx, func(tx *wtx) error {
		if err := requireObjectTx(ctx, tx, a.ObjectKey); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, `DELETE FROM alarms`+objectWhere+` AND method = ? AND fired = 0`,
			append(keyArgs(a.ObjectKey), a.Method)...); err != nil {
			return fmt.Errorf("sqlite: replace alarm: %w", err)
		}
		var err error
		out, err = scanAlarm(tx.QueryRowContext(ctx, `INSERT INTO alarms (`+alarmCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, '', ?, ?) RETURNING `+alarmCols,
			id, a.TenantID, a.Class, a.ObjectKey.ID, a.Method, args, micros(a.FireAt), now, now))
		if s.drv.isUnique(err) {
			return fmt.Errorf("alarm %q: %w", id, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: insert alarm %q: %w", id, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListAlarms implements store.ObjectStore: pending and fired, by FireAt.
func (s *Store) ListAlarms(ctx context.Context, key store.ObjectKey) ([]*store.Alarm, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+alarmCols+` FROM alarms`+objectWhere+` ORDER BY fire_at, id`,
		keyArgs(key)...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list alarms of %q: %w", keyName(key), err)
	}
	return scanAlarms(rows)
}

// GetAlarm implements store.ObjectStore.
func (s *Store) GetAlarm(ctx context.Context, id string) (*store.Alarm, error) {
	a, err := scanAlarm(s.read.QueryRowContext(ctx, `SELECT `+alarmCols+` FROM alarms WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("alarm %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get alarm %q: %w", id, err)
	}
	return a, nil
}

// DeleteAlarm implements store.ObjectStore.
func (s *Store) DeleteAlarm(ctx context.Context, id string) error {
	res, err := s.write.ExecContext(ctx, `DELETE FROM alarms WHERE id = ?`, id)
	if err != nil {
		return fmt.Errorf("sqlite: delete alarm %q: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("alarm %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// CountPendingAlarms implements store.ObjectStore.
func (s *Store) CountPendingAlarms(ctx context.Context, key store.ObjectKey) (int64, error) {
	var n int64
	if err := s.read.QueryRowContext(ctx, `SELECT COUNT(*) FROM alarms`+objectWhere+` AND fired = 0`,
		keyArgs(key)...).Scan(&n); err != nil {
		return 0, fmt.Errorf("sqlite: count alarms of %q: %w", keyName(key), err)
	}
	return n, nil
}

// DueAlarms implements store.ObjectStore, by FireAt then id; limit <= 0 is
// no limit.
func (s *Store) DueAlarms(ctx context.Context, now time.Time, limit int) ([]*store.Alarm, error) {
	if limit <= 0 {
		limit = -1
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+alarmCols+` FROM alarms WHERE fired = 0 AND fire_at <= ?
		ORDER BY fire_at, id LIMIT ?`, micros(now), limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: due alarms: %w", err)
	}
	return scanAlarms(rows)
}

// MarkAlarmFired implements store.ObjectStore. Marking twice is harmless
// (at-least-once delivery may finish an alarm twice).
func (s *Store) MarkAlarmFired(ctx context.Context, id, lastError string) error {
	const q = `UPDATE alarms SET fired = 1, last_error = ?, updated_at = ? WHERE id = ?`
	if store.FencesFrom(ctx) != nil {
		// Fenced: the alarm's object names the lease.
		return s.inTx(ctx, func(tx *wtx) error {
			var key store.ObjectKey
			err := tx.QueryRowContext(ctx, `SELECT tenant_id, class, object_id FROM alarms WHERE id = ?`, id).
				Scan(&key.TenantID, &key.Class, &key.ID)
			if errors.Is(err, sql.ErrNoRows) {
				return fmt.Errorf("alarm %q: %w", id, store.ErrNotFound)
			}
			if err != nil {
				return fmt.Errorf("sqlite: read alarm %q: %w", id, err)
			}
			if err := checkFences(ctx, tx, key); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, q, lastError, micros(s.timestamp()), id); err != nil {
				return fmt.Errorf("sqlite: mark alarm %q fired: %w", id, err)
			}
			return nil
		})
	}
	res, err := s.write.ExecContext(ctx, q, lastError, micros(s.timestamp()), id)
	if err != nil {
		return fmt.Errorf("sqlite: mark alarm %q fired: %w", id, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("alarm %q: %w", id, store.ErrNotFound)
	}
	return nil
}

// RecordAlarmAttempt implements store.ObjectStore.
func (s *Store) RecordAlarmAttempt(ctx context.Context, id, lastError string) (*store.Alarm, error) {
	a, err := scanAlarm(s.write.QueryRowContext(ctx, `UPDATE alarms SET attempts = attempts + 1, last_error = ?,
		updated_at = ? WHERE id = ? RETURNING `+alarmCols, lastError, micros(s.timestamp()), id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("alarm %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: record alarm %q attempt: %w", id, err)
	}
	return a, nil
}
