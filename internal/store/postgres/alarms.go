package postgres

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const alarmCols = `id, tenant_id, class, object_id, method, args, fire_at, fired, attempts, last_error,
	created_at, updated_at`

// scanAlarm reads alarmCols. Alarm.ID is the alarm's id; the object's id is
// Alarm.ObjectKey.ID (the embedded field is shadowed).
func scanAlarm(row pgx.Row) (*store.Alarm, error) {
	var (
		a    store.Alarm
		args []byte
	)
	if err := row.Scan(&a.ID, &a.TenantID, &a.Class, &a.ObjectKey.ID, &a.Method, &args, &a.FireAt, &a.Fired,
		&a.Attempts, &a.LastError, &a.CreatedAt, &a.UpdatedAt); err != nil {
		return nil, err
	}
	a.Args = rawOrNil(args)
	a.FireAt, a.CreatedAt, a.UpdatedAt = a.FireAt.UTC(), a.CreatedAt.UTC(), a.UpdatedAt.UTC()
	return &a, nil
}

func collectAlarms(op string, rows pgx.Rows, err error) ([]*store.Alarm, error) {
	if err != nil {
		return nil, mapErr(op, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (*store.Alarm, error) { return scanAlarm(row) })
	if err != nil {
		return nil, mapErr(op, err)
	}
	if out == nil {
		out = []*store.Alarm{}
	}
	return out, nil
}

// SetAlarm inserts an alarm on an existing object, replacing its pending
// alarm for the same method in one transaction. The object's row lock
// serialises concurrent setters; the partial unique index would refuse a
// second pending alarm anyway. A fired alarm is history and stays. The new
// alarm starts unfired with no attempts, whatever the caller sent.
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
	args, err := jsonArg("alarm args", a.Args)
	if err != nil {
		return nil, err
	}
	id := a.ID
	if id == "" {
		id = ids.New("alm")
	}
	now := s.clock()
	op := fmt.Sprintf("set alarm %s on %q", id, keyName(a.ObjectKey))
	var out *store.Alarm
	err = s.inTx(ctx, func(tx pgx.Tx) error {
		if _, err := getObject(ctx, tx, a.ObjectKey, true); err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM alarms`+objectWhere+` AND method = $4 AND NOT fired`,
			keyArgs(a.ObjectKey, a.Method)...); err != nil {
			return mapErr(op, err)
		}
		al, err := scanAlarm(tx.QueryRow(ctx, `INSERT INTO alarms (`+alarmCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7, false, 0, '', $8, $8) RETURNING `+alarmCols,
			id, a.TenantID, a.Class, a.ObjectKey.ID, a.Method, args, a.FireAt, now))
		if isUniqueViolation(err) {
			return fmt.Errorf("%s: %w", op, store.ErrAlreadyExists)
		}
		if err != nil {
			return mapErr(op, err)
		}
		out = al
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ListAlarms lists the object's alarms, pending and fired, by FireAt.
func (s *Store) ListAlarms(ctx context.Context, key store.ObjectKey) ([]*store.Alarm, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+alarmCols+` FROM alarms`+objectWhere+` ORDER BY fire_at, id`, keyArgs(key)...)
	return collectAlarms(fmt.Sprintf("list alarms of %q", keyName(key)), rows, err)
}

// GetAlarm returns an alarm or ErrNotFound.
func (s *Store) GetAlarm(ctx context.Context, id string) (*store.Alarm, error) {
	a, err := scanAlarm(s.pool.QueryRow(ctx, `SELECT `+alarmCols+` FROM alarms WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("alarm %s", id), err)
	}
	return a, nil
}

// DeleteAlarm removes an alarm or returns ErrNotFound.
func (s *Store) DeleteAlarm(ctx context.Context, id string) error {
	tag, err := s.pool.Exec(ctx, `DELETE FROM alarms WHERE id = $1`, id)
	if err != nil {
		return mapErr(fmt.Sprintf("delete alarm %s", id), err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete alarm %s: %w", id, store.ErrNotFound)
	}
	return nil
}

// CountPendingAlarms counts the object's unfired alarms.
func (s *Store) CountPendingAlarms(ctx context.Context, key store.ObjectKey) (int64, error) {
	var n int64
	err := s.pool.QueryRow(ctx, `SELECT count(*) FROM alarms`+objectWhere+` AND NOT fired`, keyArgs(key)...).Scan(&n)
	return n, mapErr(fmt.Sprintf("count alarms of %q", keyName(key)), err)
}

// DueAlarms returns unfired alarms with FireAt <= now by FireAt then id;
// limit <= 0 is no limit.
func (s *Store) DueAlarms(ctx context.Context, now time.Time, limit int) ([]*store.Alarm, error) {
	var lim *int
	if limit > 0 {
		lim = &limit
	}
	rows, err := s.pool.Query(ctx, `SELECT `+alarmCols+` FROM alarms WHERE NOT fired AND fire_at <= $1
		ORDER BY fire_at, id LIMIT $2`, now, lim)
	return collectAlarms("due alarms", rows, err)
}

// MarkAlarmFired sets Fired and LastError. Marking twice is harmless
// (at-least-once delivery may finish an alarm twice).
func (s *Store) MarkAlarmFired(ctx context.Context, id, lastError string) error {
	const q = `UPDATE alarms SET fired = true, last_error = $2, updated_at = $3 WHERE id = $1`
	op := fmt.Sprintf("mark alarm %s fired", id)
	if store.FencesFrom(ctx) == nil {
		tag, err := s.pool.Exec(ctx, q, id, lastError, s.clock())
		if err != nil {
			return mapErr(op, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("%s: %w", op, store.ErrNotFound)
		}
		return nil
	}
	// Fenced: the alarm's object names the lease. The alarm row is locked
	// first, so the object it names cannot change before the update.
	return s.inTx(ctx, func(tx pgx.Tx) error {
		var key store.ObjectKey
		if err := tx.QueryRow(ctx, `SELECT tenant_id, class, object_id FROM alarms WHERE id = $1 FOR UPDATE`,
			id).Scan(&key.TenantID, &key.Class, &key.ID); err != nil {
			return mapErr(op, err)
		}
		if err := checkFences(ctx, tx, key); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, q, id, lastError, s.clock())
		return mapErr(op, err)
	})
}

// RecordAlarmAttempt increments Attempts and records lastError.
func (s *Store) RecordAlarmAttempt(ctx context.Context, id, lastError string) (*store.Alarm, error) {
	a, err := scanAlarm(s.pool.QueryRow(ctx, `UPDATE alarms SET attempts = attempts + 1, last_error = $2,
		updated_at = $3 WHERE id = $1 RETURNING `+alarmCols, id, lastError, s.clock()))
	if err != nil {
		return nil, mapErr(fmt.Sprintf("record alarm %s attempt", id), err)
	}
	return a, nil
}
