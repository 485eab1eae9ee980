package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/store"
)

const (
	endpointCols = `id, tenant_id, url, description, event_types, secret, created_at`
	deliveryCols = `seq, id, endpoint_id, tenant_id, event_id, event_type, order_key, payload, status, attempts,
		next_attempt_at, last_error, last_status, created_at, updated_at, delivered_at`
)

func scanEndpoint(r scanner) (*store.WebhookEndpoint, error) {
	var (
		e       store.WebhookEndpoint
		types   string
		created int64
	)
	if err := r.Scan(&e.ID, &e.TenantID, &e.URL, &e.Description, &types, &e.Secret, &created); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(types), &e.EventTypes); err != nil {
		return nil, fmt.Errorf("sqlite: decode event types of webhook %q: %w", e.ID, err)
	}
	e.CreatedAt = fromMicros(created)
	return &e, nil
}

func scanDelivery(r scanner) (*store.WebhookDelivery, error) {
	var (
		d                      store.WebhookDelivery
		payload                string
		next, created, updated int64
		delivered              sql.NullInt64
	)
	if err := r.Scan(&d.Seq, &d.ID, &d.EndpointID, &d.TenantID, &d.EventID, &d.EventType, &d.OrderKey, &payload,
		&d.Status, &d.Attempts, &next, &d.LastError, &d.LastStatus, &created, &updated, &delivered); err != nil {
		return nil, err
	}
	d.Payload = json.RawMessage(payload)
	d.NextAttemptAt, d.CreatedAt, d.UpdatedAt = fromMicros(next), fromMicros(created), fromMicros(updated)
	d.DeliveredAt = timePtr(delivered)
	return &d, nil
}

// SetWebhookNotify implements store.WebhookStore.
func (s *Store) SetWebhookNotify(fn func()) { s.outbox.Set(fn) }

// CreateWebhookEndpoint implements store.WebhookStore: the endpoint and
// its subscriptions in one transaction.
func (s *Store) CreateWebhookEndpoint(ctx context.Context, e *store.WebhookEndpoint) (*store.WebhookEndpoint, error) {
	in := *e
	if in.ID == "" {
		in.ID = ids.New("whep")
	}
	if in.CreatedAt.IsZero() {
		in.CreatedAt = s.timestamp()
	}
	types, _ := json.Marshal(in.EventTypes)
	var out *store.WebhookEndpoint
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		out, err = scanEndpoint(tx.QueryRowContext(ctx, `INSERT INTO webhook_endpoints (`+endpointCols+`)
			VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT DO NOTHING RETURNING `+endpointCols,
			in.ID, in.TenantID, in.URL, in.Description, string(types), in.Secret, micros(in.CreatedAt)))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("webhook endpoint %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return fmt.Errorf("sqlite: create webhook endpoint %q: %w", in.ID, err)
		}
		for _, t := range in.EventTypes {
			if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_subscriptions (tenant_id, event_type, endpoint_id)
				VALUES (?, ?, ?) ON CONFLICT DO NOTHING`, in.TenantID, t, in.ID); err != nil {
				return fmt.Errorf("sqlite: subscribe webhook endpoint %q to %q: %w", in.ID, t, err)
			}
		}
		return nil
	})
	return out, err
}

// GetWebhookEndpoint implements store.WebhookStore.
func (s *Store) GetWebhookEndpoint(ctx context.Context, id string) (*store.WebhookEndpoint, error) {
	e, err := scanEndpoint(s.read.QueryRowContext(ctx, `SELECT `+endpointCols+` FROM webhook_endpoints WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("webhook endpoint %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get webhook endpoint %q: %w", id, err)
	}
	return e, nil
}

// ListWebhookEndpoints implements store.WebhookStore, oldest first.
func (s *Store) ListWebhookEndpoints(ctx context.Context, tenantID string) ([]*store.WebhookEndpoint, error) {
	rows, err := s.read.QueryContext(ctx, `SELECT `+endpointCols+` FROM webhook_endpoints WHERE tenant_id = ? ORDER BY id`, tenantID)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list webhook endpoints: %w", err)
	}
	defer rows.Close()
	out := []*store.WebhookEndpoint{}
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: list webhook endpoints: %w", err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// DeleteWebhookEndpoint implements store.WebhookStore.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx *wtx) error {
		res, err := tx.ExecContext(ctx, `DELETE FROM webhook_endpoints WHERE id = ?`, id)
		if err != nil {
			return fmt.Errorf("sqlite: delete webhook endpoint %q: %w", id, err)
		}
		if n, _ := res.RowsAffected(); n == 0 {
			return fmt.Errorf("webhook endpoint %q: %w", id, store.ErrNotFound)
		}
		for _, q := range []string{`DELETE FROM webhook_subscriptions WHERE endpoint_id = ?`, `DELETE FROM webhook_deliveries WHERE endpoint_id = ?`} {
			if _, err := tx.ExecContext(ctx, q, id); err != nil {
				return fmt.Errorf("sqlite: delete webhook endpoint %q: %w", id, err)
			}
		}
		return nil
	})
}

// GetWebhookDelivery implements store.WebhookStore.
func (s *Store) GetWebhookDelivery(ctx context.Context, id string) (*store.WebhookDelivery, error) {
	d, err := scanDelivery(s.read.QueryRowContext(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("webhook delivery %q: %w", id, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get webhook delivery %q: %w", id, err)
	}
	return d, nil
}

// ListWebhookDeliveries implements store.WebhookStore.
func (s *Store) ListWebhookDeliveries(ctx context.Context, p store.ListWebhookDeliveriesParams) ([]*store.WebhookDelivery, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.read.QueryContext(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries
		WHERE endpoint_id = ? AND seq > ? AND (? = '' OR status = ?) ORDER BY seq LIMIT ?`,
		p.EndpointID, p.AfterSeq, p.Status, p.Status, limit)
	if err != nil {
		return nil, fmt.Errorf("sqlite: list webhook deliveries: %w", err)
	}
	return collectDeliveries(rows)
}

func collectDeliveries(rows *sql.Rows) ([]*store.WebhookDelivery, error) {
	defer rows.Close()
	out := []*store.WebhookDelivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: scan webhook delivery: %w", err)
		}
		out = append(out, d)
	}
	return out, rows.Err()
}

// ClaimWebhookDeliveries implements store.WebhookStore. The single writer
// makes select-then-lease atomic.
func (s *Store) ClaimWebhookDeliveries(ctx context.Context, p store.ClaimWebhookParams) ([]*store.WebhookDelivery, error) {
	var out []*store.WebhookDelivery
	err := s.inTx(ctx, func(tx *wtx) error {
		rows, err := tx.QueryContext(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries d
			WHERE status = 'pending' AND next_attempt_at <= ?
			AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.status = 'pending'
				AND e.endpoint_id = d.endpoint_id AND e.order_key = d.order_key AND e.seq < d.seq)
			ORDER BY next_attempt_at, seq LIMIT ?`, micros(p.Now), p.Limit)
		if err != nil {
			return fmt.Errorf("sqlite: claim webhook deliveries: %w", err)
		}
		if out, err = collectDeliveries(rows); err != nil {
			return err
		}
		until := p.Now.Add(p.Lease)
		for _, d := range out {
			if _, err := tx.ExecContext(ctx, `UPDATE webhook_deliveries SET next_attempt_at = ? WHERE seq = ?`,
				micros(until), d.Seq); err != nil {
				return fmt.Errorf("sqlite: lease webhook delivery %q: %w", d.ID, err)
			}
			d.NextAttemptAt = until
		}
		return nil
	})
	return out, err
}

// FinishWebhookAttempt implements store.WebhookStore.
func (s *Store) FinishWebhookAttempt(ctx context.Context, a store.WebhookAttempt) (*store.WebhookDelivery, error) {
	status := store.DeliveryPending
	var delivered sql.NullInt64
	switch {
	case a.Delivered:
		status, delivered = store.DeliveryDelivered, sql.NullInt64{Int64: micros(a.At), Valid: true}
	case a.Dead:
		status = store.DeliveryDead
	}
	claimed := sql.NullInt64{Int64: micros(a.Claimed), Valid: !a.Claimed.IsZero()}
	d, err := scanDelivery(s.write.QueryRowContext(ctx, `UPDATE webhook_deliveries SET status = ?, attempts = attempts + 1,
		next_attempt_at = ?, last_error = ?, last_status = ?, updated_at = ?, delivered_at = ?
		WHERE id = ? AND (? IS NULL OR next_attempt_at = ?) RETURNING `+deliveryCols,
		status, micros(a.NextAttemptAt), a.Error, a.Status, micros(a.At), delivered, a.ID, claimed, claimed))
	if errors.Is(err, sql.ErrNoRows) {
		if _, gerr := s.GetWebhookDelivery(ctx, a.ID); gerr == nil && !a.Claimed.IsZero() {
			return nil, fmt.Errorf("webhook delivery %q: redelivered while the attempt ran: %w", a.ID, store.ErrConflict)
		}
		return nil, fmt.Errorf("webhook delivery %q: %w", a.ID, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: finish webhook attempt %q: %w", a.ID, err)
	}
	return d, nil
}

// RedeliverWebhookDelivery implements store.WebhookStore.
func (s *Store) RedeliverWebhookDelivery(ctx context.Context, id string, now time.Time) (*store.WebhookDelivery, error) {
	var out *store.WebhookDelivery
	err := s.inTx(ctx, func(tx *wtx) error {
		var err error
		out, err = scanDelivery(tx.QueryRowContext(ctx, `UPDATE webhook_deliveries SET status = 'pending', attempts = 0,
			next_attempt_at = ?, updated_at = ?, delivered_at = NULL WHERE id = ? RETURNING `+deliveryCols,
			micros(now), micros(now), id))
		if errors.Is(err, sql.ErrNoRows) {
			return fmt.Errorf("webhook delivery %q: %w", id, store.ErrNotFound)
		}
		if err != nil {
			return fmt.Errorf("sqlite: redeliver webhook delivery %q: %w", id, err)
		}
		s.outbox.Mark()
		return nil
	})
	return out, err
}

// webhookEvent is one event to announce.
type webhookEvent struct {
	typ, resource string
	at            time.Time
	// extra: the payload's data fields beyond the common ones.
	extra map[string]string
}

// enqueueSessionWebhooksTx writes the outbox rows of the session events
// evs announce, in the caller's transaction. One query finds the
// session's tenant and its subscriptions (none: nothing more to do).
func (s *Store) enqueueSessionWebhooksTx(ctx context.Context, tx *wtx, sessionID string, evs []store.SessionEvent) error {
	var whs []webhookEvent
	for _, ev := range evs {
		if t, extra := store.WebhookOfEvent(ev); t != "" {
			whs = append(whs, webhookEvent{typ: t, resource: sessionID, at: ev.CreatedAt, extra: extra})
		}
	}
	if len(whs) == 0 {
		return nil
	}
	tenant, subs, err := subscriptionsTx(ctx, tx, `SELECT s.tenant_id, w.event_type, w.endpoint_id FROM sessions s
		JOIN webhook_subscriptions w ON w.tenant_id = s.tenant_id WHERE s.id = ? AND s.thread_of = '' ORDER BY w.endpoint_id`, sessionID)
	if err != nil {
		return err
	}
	return s.writeDeliveriesTx(ctx, tx, tenant, sessionID, whs, subs)
}

// enqueueWebhooksTx writes one delivery per event and subscribed endpoint
// of the tenant, in order, in the caller's transaction.
func (s *Store) enqueueWebhooksTx(ctx context.Context, tx *wtx, tenant, orderKey string, whs []webhookEvent) error {
	_, subs, err := subscriptionsTx(ctx, tx, `SELECT tenant_id, event_type, endpoint_id FROM webhook_subscriptions
		WHERE tenant_id = ? ORDER BY endpoint_id`, tenant)
	if err != nil {
		return err
	}
	return s.writeDeliveriesTx(ctx, tx, tenant, orderKey, whs, subs)
}

// subscriptionsTx reads (tenant, event type, endpoint) rows into the
// endpoints subscribed to each type.
func subscriptionsTx(ctx context.Context, tx *wtx, query string, arg string) (string, map[string][]string, error) {
	rows, err := tx.QueryContext(ctx, query, arg)
	if err != nil {
		return "", nil, fmt.Errorf("sqlite: webhook subscriptions: %w", err)
	}
	defer rows.Close()
	var tenant string
	subs := map[string][]string{}
	for rows.Next() {
		var typ, ep string
		if err := rows.Scan(&tenant, &typ, &ep); err != nil {
			return "", nil, fmt.Errorf("sqlite: webhook subscriptions: %w", err)
		}
		subs[typ] = append(subs[typ], ep)
	}
	return tenant, subs, rows.Err()
}

// writeDeliveriesTx inserts the outbox rows: per event, one per endpoint
// subscribed to its type, the event's payload shared.
func (s *Store) writeDeliveriesTx(ctx context.Context, tx *wtx, tenant, orderKey string, whs []webhookEvent, subs map[string][]string) error {
	for _, w := range whs {
		endpoints := subs[w.typ]
		if len(endpoints) == 0 {
			continue
		}
		eventID := ids.New("whe")
		payload := string(store.WebhookPayload(eventID, w.typ, w.resource, tenant, w.at, w.extra))
		now := micros(s.timestamp())
		for _, ep := range endpoints {
			if _, err := tx.ExecContext(ctx, `INSERT INTO webhook_deliveries (id, endpoint_id, tenant_id, event_id,
				event_type, order_key, payload, status, next_attempt_at, created_at, updated_at)
				VALUES (?, ?, ?, ?, ?, ?, ?, 'pending', ?, ?, ?)`,
				ids.New("whd"), ep, tenant, eventID, w.typ, orderKey, payload, now, now, now); err != nil {
				return fmt.Errorf("sqlite: write webhook outbox row of %s: %w", w.typ, err)
			}
		}
		s.outbox.Mark()
	}
	return nil
}

// lifecycleWebhookTx announces one resource change (created, updated,
// archived, deleted) in the caller's transaction.
func (s *Store) lifecycleWebhookTx(ctx context.Context, tx *wtx, tenant, resource, typ string, at time.Time) error {
	return s.enqueueWebhooksTx(ctx, tx, tenant, resource, []webhookEvent{{typ: typ, resource: resource, at: at}})
}

// credentialWebhooksTx announces credentials of one vault (ids) with one
// type, ordered with the vault's own announcements.
func (s *Store) credentialWebhooksTx(ctx context.Context, tx *wtx, tenant, vaultID, typ string, ids []string, at time.Time) error {
	ids = slices.Sorted(slices.Values(ids))
	whs := make([]webhookEvent, len(ids))
	for i, id := range ids {
		whs[i] = webhookEvent{typ: typ, resource: id, at: at, extra: map[string]string{"vault_id": vaultID}}
	}
	return s.enqueueWebhooksTx(ctx, tx, tenant, vaultID, whs)
}

// PruneWebhookDeliveries implements store.WebhookStore. A final row's
// updated_at is when its last attempt ended (its delivered_at, when
// delivered).
func (s *Store) PruneWebhookDeliveries(ctx context.Context, before time.Time, limit int) (int64, error) {
	res, err := s.write.ExecContext(ctx, `DELETE FROM webhook_deliveries WHERE seq IN (SELECT seq FROM webhook_deliveries
		WHERE status <> 'pending' AND updated_at < ? ORDER BY updated_at LIMIT ?)`, micros(before), limit)
	if err != nil {
		return 0, fmt.Errorf("sqlite: prune webhook deliveries: %w", err)
	}
	n, _ := res.RowsAffected()
	return n, nil
}
