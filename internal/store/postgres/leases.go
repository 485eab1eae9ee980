package postgres

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Ownership leases (issue 16). Expiry is judged by the database's clock
// (now() in SQL), never a node's, so nodes whose clocks disagree still
// agree on who holds a resource. A new holder's token comes from the
// lease_tokens sequence, which never goes back.

const leaseCols = `resource, node, address, token, expires_at, acquired_at`

func scanLease(row pgx.Row) (*store.Lease, error) {
	var l store.Lease
	if err := row.Scan(&l.Resource, &l.Node, &l.Address, &l.Token, &l.ExpiresAt, &l.AcquiredAt); err != nil {
		return nil, err
	}
	l.ExpiresAt, l.AcquiredAt = l.ExpiresAt.UTC(), l.AcquiredAt.UTC()
	return &l, nil
}

// ttlMicros is a lease's ttl in the microseconds Postgres keeps (at least
// one, so a positive ttl never means "already expired").
func ttlMicros(ttl time.Duration) int64 { return max(1, ttl.Microseconds()) }

// acquireLeaseSQL takes the row when it is free (the insert), expired, or
// already the node's. A conflicting row that is neither is still locked by
// ON CONFLICT, so the holder read next in the same transaction is the one
// that refused. nextval is drawn on every call (a VALUES expression runs
// before the conflict is known): tokens keep growing, with gaps.
const acquireLeaseSQL = `INSERT INTO leases AS l (resource, node, address, token, expires_at, acquired_at)
	VALUES ($1, $2, $3, nextval('lease_tokens'), now() + $4::bigint * interval '1 microsecond', now())
	ON CONFLICT (resource) DO UPDATE SET
		node = excluded.node,
		address = excluded.address,
		token = CASE WHEN l.node = excluded.node THEN l.token ELSE excluded.token END,
		expires_at = excluded.expires_at,
		acquired_at = CASE WHEN l.node = excluded.node THEN l.acquired_at ELSE excluded.acquired_at END
	WHERE l.expires_at <= now() OR l.node = excluded.node
	RETURNING ` + leaseCols

// AcquireLease implements store.LeaseStore: one INSERT … ON CONFLICT DO
// UPDATE decides the race. Of concurrent acquirers of a free or expired
// resource one inserts or updates the row; the others wait for its row lock
// and then see a live lease of another node.
func (s *Store) AcquireLease(ctx context.Context, resource, node, address string, ttl time.Duration) (*store.Lease, error) {
	if resource == "" || node == "" || ttl <= 0 {
		return nil, fmt.Errorf("acquire lease: resource %q, node %q and a positive ttl (%s) are required: %w",
			resource, node, ttl, store.ErrInvalid)
	}
	var out *store.Lease
	held := false
	err := s.inTx(ctx, func(tx pgx.Tx) error {
		l, err := scanLease(tx.QueryRow(ctx, acquireLeaseSQL, resource, node, address, ttlMicros(ttl)))
		if err == nil {
			out, held = l, false
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return mapErr("acquire lease "+resource, err)
		}
		out, err = scanLease(tx.QueryRow(ctx, `SELECT `+leaseCols+` FROM leases WHERE resource = $1`, resource))
		held = true
		return mapErr("read holder of lease "+resource, err)
	})
	if err != nil {
		return nil, err
	}
	if held {
		return out, fmt.Errorf("lease %s: node %s holds it until %s: %w", resource, out.Node,
			out.ExpiresAt.Format(time.RFC3339Nano), store.ErrLeaseHeld)
	}
	return out, nil
}

// RenewLeases implements store.LeaseStore. The rows are locked in resource
// order, the order in which fenced writes read theirs FOR SHARE: in the
// table's order, a renewal and a fenced batch could each hold a row the
// other waits for (a deadlock, one of them aborted). A row another node
// took over no longer names node: the locking read, re-checking its WHERE
// after waiting for the takeover's row lock, passes it by.
func (s *Store) RenewLeases(ctx context.Context, node string, ttl time.Duration) ([]store.HeldLease, error) {
	if node == "" || ttl <= 0 {
		return nil, fmt.Errorf("renew leases: node %q and a positive ttl (%s) are required: %w", node, ttl, store.ErrInvalid)
	}
	rows, err := s.pool.Query(ctx, `WITH r AS (
			UPDATE leases SET expires_at = now() + $2::bigint * interval '1 microsecond'
			WHERE node = $1 AND resource IN (
				SELECT resource FROM leases WHERE node = $1 ORDER BY resource FOR NO KEY UPDATE)
			RETURNING resource, token
		) SELECT resource, token FROM r ORDER BY resource`, node, ttlMicros(ttl))
	if err != nil {
		return nil, mapErr("renew leases of node "+node, err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (store.HeldLease, error) {
		var h store.HeldLease
		err := row.Scan(&h.Resource, &h.Token)
		return h, err
	})
	if err != nil {
		return nil, mapErr("renew leases of node "+node, err)
	}
	return out, nil
}

// GetLease implements store.LeaseStore.
func (s *Store) GetLease(ctx context.Context, resource string) (*store.Lease, error) {
	l, err := scanLease(s.pool.QueryRow(ctx, `SELECT `+leaseCols+` FROM leases WHERE resource = $1`, resource))
	if err != nil {
		return nil, mapErr("lease "+resource, err)
	}
	return l, nil
}

// ReleaseLease implements store.LeaseStore.
func (s *Store) ReleaseLease(ctx context.Context, resource string, token int64) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM leases WHERE resource = $1 AND token = $2`, resource, token)
	return mapErr("release lease "+resource, err)
}

// checkFences is the fencing check of the object writes (store.WithFences):
// inside tx, before anything is written, every object's lease must carry
// the token ctx's fences give for it. The rows are read FOR SHARE (in
// resource order, like every other fenced write), so a takeover waits for
// this transaction to commit. Without fences it does nothing: one daemon
// alone pays no query.
func checkFences(ctx context.Context, tx pgx.Tx, keys ...store.ObjectKey) error {
	fences := store.FencesFrom(ctx)
	if fences == nil {
		return nil
	}
	want := make(map[string]int64, len(keys))
	resources := make([]string, 0, len(keys))
	for _, k := range keys {
		r := store.ObjectResource(k)
		tok, ok := fences(r)
		if !ok {
			return fmt.Errorf("write to %s: this node holds no lease on it: %w", r, store.ErrFenced)
		}
		if _, dup := want[r]; !dup {
			resources = append(resources, r)
		}
		want[r] = tok
	}
	rows, err := tx.Query(ctx, `SELECT resource, token FROM leases WHERE resource = ANY($1)
		ORDER BY resource FOR SHARE`, resources)
	if err != nil {
		return mapErr("check leases", err)
	}
	got := make(map[string]int64, len(resources))
	var (
		r   string
		tok int64
	)
	_, err = pgx.ForEachRow(rows, []any{&r, &tok}, func() error {
		got[r] = tok
		return nil
	})
	if err != nil {
		return mapErr("check leases", err)
	}
	for _, r := range resources {
		cur, ok := got[r]
		switch {
		case !ok:
			return fmt.Errorf("write to %s with token %d: it has no lease now: %w", r, want[r], store.ErrFenced)
		case cur != want[r]:
			return fmt.Errorf("write to %s with token %d: the lease's token is %d now: %w", r, want[r], cur, store.ErrFenced)
		}
	}
	return nil
}
