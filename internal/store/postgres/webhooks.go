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
	endpointCols = `id, tenant_id, url, description, event_types, secret, created_at`
	deliveryCols = `seq, id, endpoint_id, tenant_id, event_id, event_type, order_key, payload, status, attempts,
		next_attempt_at, last_error, last_status, created_at, updated_at, delivered_at`
)

func scanEndpoint(row pgx.Row) (*store.WebhookEndpoint, error) {
	var (
		e     store.WebhookEndpoint
		types string
	)
	if err := row.Scan(&e.ID, &e.TenantID, &e.URL, &e.Description, &types, &e.Secret, &e.CreatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal([]byte(types), &e.EventTypes); err != nil {
		return nil, fmt.Errorf("postgres: decode event types of webhook %q: %w", e.ID, err)
	}
	e.CreatedAt = e.CreatedAt.UTC()
	return &e, nil
}

func scanDelivery(row pgx.Row) (*store.WebhookDelivery, error) {
	var (
		d       store.WebhookDelivery
		payload string
	)
	if err := row.Scan(&d.Seq, &d.ID, &d.EndpointID, &d.TenantID, &d.EventID, &d.EventType, &d.OrderKey, &payload,
		&d.Status, &d.Attempts, &d.NextAttemptAt, &d.LastError, &d.LastStatus, &d.CreatedAt, &d.UpdatedAt,
		&d.DeliveredAt); err != nil {
		return nil, err
	}
	d.Payload = json.RawMessage(payload)
	d.NextAttemptAt, d.CreatedAt, d.UpdatedAt = d.NextAttemptAt.UTC(), d.CreatedAt.UTC(), d.UpdatedAt.UTC()
	d.DeliveredAt = utcPtr(d.DeliveredAt)
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
		in.CreatedAt = s.clock()
	}
	types, _ := json.Marshal(in.EventTypes)
	var out *store.WebhookEndpoint
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanEndpoint(tx.QueryRow(ctx, `INSERT INTO webhook_endpoints (`+endpointCols+`)
			VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING RETURNING `+endpointCols,
			in.ID, in.TenantID, in.URL, in.Description, string(types), in.Secret, in.CreatedAt))
		if errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("webhook endpoint %q: %w", in.ID, store.ErrAlreadyExists)
		}
		if err != nil {
			return mapErr("create webhook endpoint "+in.ID, err)
		}
		for _, t := range in.EventTypes {
			if _, err := tx.Exec(ctx, `INSERT INTO webhook_subscriptions (tenant_id, event_type, endpoint_id)
				VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`, in.TenantID, t, in.ID); err != nil {
				return mapErr("subscribe webhook endpoint "+in.ID, err)
			}
		}
		return nil
	})
	return out, err
}

// GetWebhookEndpoint implements store.WebhookStore.
func (s *Store) GetWebhookEndpoint(ctx context.Context, id string) (*store.WebhookEndpoint, error) {
	e, err := scanEndpoint(s.pool.QueryRow(ctx, `SELECT `+endpointCols+` FROM webhook_endpoints WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("get webhook endpoint "+id, err)
	}
	return e, nil
}

// ListWebhookEndpoints implements store.WebhookStore, oldest first.
func (s *Store) ListWebhookEndpoints(ctx context.Context, tenantID string) ([]*store.WebhookEndpoint, error) {
	rows, err := s.pool.Query(ctx, `SELECT `+endpointCols+` FROM webhook_endpoints WHERE tenant_id = $1 ORDER BY id`, tenantID)
	if err != nil {
		return nil, mapErr("list webhook endpoints", err)
	}
	defer rows.Close()
	out := []*store.WebhookEndpoint{}
	for rows.Next() {
		e, err := scanEndpoint(rows)
		if err != nil {
			return nil, mapErr("list webhook endpoints", err)
		}
		out = append(out, e)
	}
	return out, mapErr("list webhook endpoints", rows.Err())
}

// DeleteWebhookEndpoint implements store.WebhookStore.
func (s *Store) DeleteWebhookEndpoint(ctx context.Context, id string) error {
	return s.inTx(ctx, func(tx pgx.Tx) error {
		tag, err := tx.Exec(ctx, `DELETE FROM webhook_endpoints WHERE id = $1`, id)
		if err != nil {
			return mapErr("delete webhook endpoint "+id, err)
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("webhook endpoint %q: %w", id, store.ErrNotFound)
		}
		for _, q := range []string{`DELETE FROM webhook_subscriptions WHERE endpoint_id = $1`, `DELETE FROM webhook_deliveries WHERE endpoint_id = $1`} {
			if _, err := tx.Exec(ctx, q, id); err != nil {
				return mapErr("delete webhook endpoint "+id, err)
			}
		}
		return nil
	})
}

// GetWebhookDelivery implements store.WebhookStore.
func (s *Store) GetWebhookDelivery(ctx context.Context, id string) (*store.WebhookDelivery, error) {
	d, err := scanDelivery(s.pool.QueryRow(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries WHERE id = $1`, id))
	if err != nil {
		return nil, mapErr("get webhook delivery "+id, err)
	}
	return d, nil
}

// ListWebhookDeliveries implements store.WebhookStore.
func (s *Store) ListWebhookDeliveries(ctx context.Context, p store.ListWebhookDeliveriesParams) ([]*store.WebhookDelivery, error) {
	limit := p.Limit
	if limit <= 0 {
		limit = 100
	}
	rows, err := s.pool.Query(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries
		WHERE endpoint_id = $1 AND seq > $2 AND ($3 = '' OR status = $3) ORDER BY seq LIMIT $4`,
		p.EndpointID, p.AfterSeq, p.Status, limit)
	if err != nil {
		return nil, mapErr("list webhook deliveries", err)
	}
	return collectDeliveries(rows)
}

func collectDeliveries(rows pgx.Rows) ([]*store.WebhookDelivery, error) {
	defer rows.Close()
	out := []*store.WebhookDelivery{}
	for rows.Next() {
		d, err := scanDelivery(rows)
		if err != nil {
			return nil, mapErr("scan webhook delivery", err)
		}
		out = append(out, d)
	}
	return out, mapErr("scan webhook deliveries", rows.Err())
}

// ClaimWebhookDeliveries implements store.WebhookStore. SKIP LOCKED lets
// several daemons claim side by side without taking the same row.
func (s *Store) ClaimWebhookDeliveries(ctx context.Context, p store.ClaimWebhookParams) ([]*store.WebhookDelivery, error) {
	var out []*store.WebhookDelivery
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, `SELECT `+deliveryCols+` FROM webhook_deliveries d
			WHERE status = 'pending' AND next_attempt_at <= $1
			AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.status = 'pending'
				AND e.endpoint_id = d.endpoint_id AND e.order_key = d.order_key AND e.seq < d.seq)
			ORDER BY next_attempt_at, seq LIMIT $2 FOR UPDATE OF d SKIP LOCKED`, p.Now, p.Limit)
		if err != nil {
			return mapErr("claim webhook deliveries", err)
		}
		if out, err = collectDeliveries(rows); err != nil {
			return err
		}
		until := p.Now.Add(p.Lease)
		for _, d := range out {
			if _, err := tx.Exec(ctx, `UPDATE webhook_deliveries SET next_attempt_at = $1 WHERE seq = $2`,
				until, d.Seq); err != nil {
				return mapErr("lease webhook delivery "+d.ID, err)
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
	var delivered *time.Time
	switch {
	case a.Delivered:
		status, delivered = store.DeliveryDelivered, &a.At
	case a.Dead:
		status = store.DeliveryDead
	}
	var claimed *time.Time
	if !a.Claimed.IsZero() {
		claimed = &a.Claimed
	}
	d, err := scanDelivery(s.pool.QueryRow(ctx, `UPDATE webhook_deliveries SET status = $1, attempts = attempts + 1,
		next_attempt_at = $2, last_error = $3, last_status = $4, updated_at = $5, delivered_at = $6
		WHERE id = $7 AND ($8::timestamptz IS NULL OR next_attempt_at = $8) RETURNING `+deliveryCols,
		status, a.NextAttemptAt, a.Error, a.Status, a.At, delivered, a.ID, claimed))
	if errors.Is(err, pgx.ErrNoRows) && claimed != nil {
		if _, gerr := s.GetWebhookDelivery(ctx, a.ID); gerr == nil {
			return nil, fmt.Errorf("webhook delivery %s: redelivered while the attempt ran: %w", a.ID, store.ErrConflict)
		}
	}
	if err != nil {
		return nil, mapErr("finish webhook attempt "+a.ID, err)
	}
	return d, nil
}

// RedeliverWebhookDelivery implements store.WebhookStore.
func (s *Store) RedeliverWebhookDelivery(ctx context.Context, id string, now time.Time) (*store.WebhookDelivery, error) {
	var out *store.WebhookDelivery
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		var err error
		out, err = scanDelivery(tx.QueryRow(ctx, `UPDATE webhook_deliveries SET status = 'pending', attempts = 0,
			next_attempt_at = $1, updated_at = $1, delivered_at = NULL WHERE id = $2 RETURNING `+deliveryCols, now, id))
		if err != nil {
			return mapErr("redeliver webhook delivery "+id, err)
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

// enqueueSessionWebhooks writes the outbox rows of the session events evs
// announce, in the caller's transaction. One query finds the session's
// tenant and its subscriptions (none: nothing more to do).
func (s *Store) enqueueSessionWebhooks(ctx context.Context, tx pgx.Tx, sessionID string, evs []store.SessionEvent) error {
	var whs []webhookEvent
	for _, ev := range evs {
		if t, extra := store.WebhookOfEvent(ev); t != "" {
			whs = append(whs, webhookEvent{typ: t, resource: sessionID, at: ev.CreatedAt, extra: extra})
		}
	}
	if len(whs) == 0 {
		return nil
	}
	tenant, subs, err := subscriptions(ctx, tx, `SELECT s.tenant_id, w.event_type, w.endpoint_id FROM sessions s
		JOIN webhook_subscriptions w ON w.tenant_id = s.tenant_id WHERE s.id = $1 AND s.thread_of = '' ORDER BY w.endpoint_id`, sessionID)
	if err != nil {
		return err
	}
	return s.writeDeliveries(ctx, tx, tenant, sessionID, whs, subs)
}

// enqueueWebhooks writes one delivery per event and subscribed endpoint of
// the tenant, in order, in the caller's transaction.
func (s *Store) enqueueWebhooks(ctx context.Context, tx pgx.Tx, tenant, orderKey string, whs []webhookEvent) error {
	_, subs, err := subscriptions(ctx, tx, `SELECT tenant_id, event_type, endpoint_id FROM webhook_subscriptions
		WHERE tenant_id = $1 ORDER BY endpoint_id`, tenant)
	if err != nil {
		return err
	}
	return s.writeDeliveries(ctx, tx, tenant, orderKey, whs, subs)
}

// subscriptions reads (tenant, event type, endpoint) rows into the
// endpoints subscribed to each type.
func subscriptions(ctx context.Context, tx pgx.Tx, query, arg string) (string, map[string][]string, error) {
	rows, err := tx.Query(ctx, query, arg)
	if err != nil {
		return "", nil, mapErr("webhook subscriptions", err)
	}
	defer rows.Close()
	var tenant string
	subs := map[string][]string{}
	for rows.Next() {
		var typ, ep string
		if err := rows.Scan(&tenant, &typ, &ep); err != nil {
			return "", nil, mapErr("webhook subscriptions", err)
		}
		subs[typ] = append(subs[typ], ep)
	}
	return tenant, subs, mapErr("webhook subscriptions", rows.Err())
}

// writeDeliveries inserts the outbox rows: per event, one per endpoint
// subscribed to its type, the event's payload shared.
func (s *Store) writeDeliveries(ctx context.Context, tx pgx.Tx, tenant, orderKey string, whs []webhookEvent, subs map[string][]string) error {
	for _, w := range whs {
		endpoints := subs[w.typ]
		if len(endpoints) == 0 {
			continue
		}
		eventID := ids.New("whe")
		payload := string(store.WebhookPayload(eventID, w.typ, w.resource, tenant, w.at, w.extra))
		now := s.clock()
		for _, ep := range endpoints {
			if _, err := tx.Exec(ctx, `INSERT INTO webhook_deliveries (id, endpoint_id, tenant_id, event_id,
				event_type, order_key, payload, status, next_attempt_at, created_at, updated_at)
				VALUES ($1, $2, $3, $4, $5, $6, $7, 'pending', $8, $8, $8)`,
				ids.New("whd"), ep, tenant, eventID, w.typ, orderKey, payload, now); err != nil {
				return mapErr("write webhook outbox row of "+w.typ, err)
			}
		}
		s.outbox.Mark()
	}
	return nil
}

// lifecycleWebhook announces one resource change (created, updated,
// archived, deleted) in the caller's transaction.
func (s *Store) lifecycleWebhook(ctx context.Context, tx pgx.Tx, tenant, resource, typ string, at time.Time) error {
	return s.enqueueWebhooks(ctx, tx, tenant, resource, []webhookEvent{{typ: typ, resource: resource, at: at}})
}

// credentialWebhooks announces credentials of one vault (ids) with one
// type, ordered with the vault's own announcements.
func (s *Store) credentialWebhooks(ctx context.Context, tx pgx.Tx, tenant, vaultID, typ string, ids []string, at time.Time) error {
	ids = slices.Sorted(slices.Values(ids))
	whs := make([]webhookEvent, len(ids))
	for i, id := range ids {
		whs[i] = webhookEvent{typ: typ, resource: id, at: at, extra: map[string]string{"vault_id": vaultID}}
	}
	return s.enqueueWebhooks(ctx, tx, tenant, vaultID, whs)
}

// PruneWebhookDeliveries implements store.WebhookStore. A final row's
// updated_at is when its last attempt ended (its delivered_at, when
// delivered).
func (s *Store) PruneWebhookDeliveries(ctx context.Context, before time.Time, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, `DELETE FROM webhook_deliveries WHERE seq IN (SELECT seq FROM webhook_deliveries
		WHERE status <> 'pending' AND updated_at < $1 ORDER BY updated_at LIMIT $2)`, before, limit)
	if err != nil {
		return 0, mapErr("prune webhook deliveries", err)
	}
	return tag.RowsAffected(), nil
}
