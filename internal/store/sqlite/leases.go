package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// Ownership leases (issue 16). Every lease change is one write transaction
// on the single write connection (BEGIN IMMEDIATE, so other processes on
// the file queue too): a check-then-write never interleaves with another
// writer. Expiry is judged by the store's clock, read once the transaction
// holds the write lock, so a call that queued behind others does not judge
// with a time from before it waited. A new holder's token comes from the
// one-row lease_tokens counter, which only grows: a released row's token
// is never handed out again.

const leaseCols = `resource, node, address, token, expires_at, acquired_at`

func scanLease(r scanner) (*store.Lease, error) {
	var (
		l                 store.Lease
		expires, acquired int64
	)
	if err := r.Scan(&l.Resource, &l.Node, &l.Address, &l.Token, &expires, &acquired); err != nil {
		return nil, err
	}
	l.ExpiresAt, l.AcquiredAt = fromMicros(expires), fromMicros(acquired)
	return &l, nil
}

// leaseExpiry is now + ttl in the microseconds the schema keeps (at least
// one past now, so a positive ttl never means "already expired").
func leaseExpiry(now time.Time, ttl time.Duration) int64 {
	return micros(now) + max(1, ttl.Microseconds())
}

// AcquireLease implements store.LeaseStore.
func (s *Store) AcquireLease(ctx context.Context, resource, node, address string, ttl time.Duration) (*store.Lease, error) {
	if resource == "" || node == "" || ttl <= 0 {
		return nil, fmt.Errorf("acquire lease: resource %q, node %q and a positive ttl (%s) are required: %w",
			resource, node, ttl, store.ErrInvalid)
	}
	var holder *store.Lease
	var out *store.Lease
	err := s.inTx(ctx, func(tx *wtx) error {
		now := s.timestamp()
		cur, err := scanLease(tx.QueryRowContext(ctx, `SELECT `+leaseCols+` FROM leases WHERE resource = ?`, resource))
		switch {
		case errors.Is(err, sql.ErrNoRows):
			cur = nil
		case err != nil:
			return fmt.Errorf("sqlite: read lease %q: %w", resource, err)
		}
		if cur != nil && cur.Node != node && micros(cur.ExpiresAt) > micros(now) {
			holder = cur
			return nil
		}
		if cur != nil && cur.Node == node {
			out, err = scanLease(tx.QueryRowContext(ctx, `UPDATE leases SET address = ?, expires_at = ?
				WHERE resource = ? RETURNING `+leaseCols, address, leaseExpiry(now, ttl), resource))
			if err != nil {
				return fmt.Errorf("sqlite: extend lease %q: %w", resource, err)
			}
			return nil
		}
		var token int64
		if err := tx.QueryRowContext(ctx, `UPDATE lease_tokens SET last = last + 1 WHERE id = 1 RETURNING last`).
			Scan(&token); err != nil {
			return fmt.Errorf("sqlite: draw lease token: %w", err)
		}
		out, err = scanLease(tx.QueryRowContext(ctx, `INSERT INTO leases (`+leaseCols+`) VALUES (?, ?, ?, ?, ?, ?)
			ON CONFLICT (resource) DO UPDATE SET node = excluded.node, address = excluded.address,
				token = excluded.token, expires_at = excluded.expires_at, acquired_at = excluded.acquired_at
			RETURNING `+leaseCols, resource, node, address, token, leaseExpiry(now, ttl), micros(now)))
		if err != nil {
			return fmt.Errorf("sqlite: take lease %q: %w", resource, err)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if holder != nil {
		return holder, fmt.Errorf("lease %s: node %s holds it until %s: %w", resource, holder.Node,
			holder.ExpiresAt.Format(time.RFC3339Nano), store.ErrLeaseHeld)
	}
	return out, nil
}

// RenewLeases implements store.LeaseStore.
func (s *Store) RenewLeases(ctx context.Context, node string, ttl time.Duration) ([]store.HeldLease, error) {
	if node == "" || ttl <= 0 {
		return nil, fmt.Errorf("renew leases: node %q and a positive ttl (%s) are required: %w", node, ttl, store.ErrInvalid)
	}
	out := []store.HeldLease{}
	err := s.inTx(ctx, func(tx *wtx) error {
		out = out[:0]
		rows, err := tx.QueryContext(ctx, `UPDATE leases SET expires_at = ? WHERE node = ? RETURNING resource, token`,
			leaseExpiry(s.timestamp(), ttl), node)
		if err != nil {
			return fmt.Errorf("sqlite: renew leases of node %q: %w", node, err)
		}
		defer rows.Close()
		for rows.Next() {
			var h store.HeldLease
			if err := rows.Scan(&h.Resource, &h.Token); err != nil {
				return fmt.Errorf("sqlite: renew leases of node %q: %w", node, err)
			}
			out = append(out, h)
		}
		return rows.Err()
	})
	if err != nil {
		return nil, err
	}
	// RETURNING has no order.
	slices.SortFunc(out, func(a, b store.HeldLease) int { return strings.Compare(a.Resource, b.Resource) })
	return out, nil
}

// GetLease implements store.LeaseStore.
func (s *Store) GetLease(ctx context.Context, resource string) (*store.Lease, error) {
	l, err := scanLease(s.read.QueryRowContext(ctx, `SELECT `+leaseCols+` FROM leases WHERE resource = ?`, resource))
	if errors.Is(err, sql.ErrNoRows) {
		return nil, fmt.Errorf("lease %q: %w", resource, store.ErrNotFound)
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: get lease %q: %w", resource, err)
	}
	return l, nil
}

// ReleaseLease implements store.LeaseStore.
func (s *Store) ReleaseLease(ctx context.Context, resource string, token int64) error {
	if _, err := s.write.ExecContext(ctx, `DELETE FROM leases WHERE resource = ? AND token = ?`, resource, token); err != nil {
		return fmt.Errorf("sqlite: release lease %q: %w", resource, err)
	}
	return nil
}

// checkFences is the fencing check of the object writes (store.WithFences):
// inside tx, before anything is written, every object's lease must carry
// the token ctx's fences give for it. The transaction holds the database's
// write lock, so no takeover can commit before it does. Without fences it
// does nothing: one daemon alone pays no query.
func checkFences(ctx context.Context, tx *wtx, keys ...store.ObjectKey) error {
	fences := store.FencesFrom(ctx)
	if fences == nil {
		return nil
	}
	for _, k := range keys {
		r := store.ObjectResource(k)
		want, ok := fences(r)
		if !ok {
			return fmt.Errorf("write to %s: this node holds no lease on it: %w", r, store.ErrFenced)
		}
		var cur int64
		err := tx.QueryRowContext(ctx, `SELECT token FROM leases WHERE resource = ?`, r).Scan(&cur)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			return fmt.Errorf("write to %s with token %d: it has no lease now: %w", r, want, store.ErrFenced)
		case err != nil:
			return fmt.Errorf("sqlite: read lease %q: %w", r, err)
		case cur != want:
			return fmt.Errorf("write to %s with token %d: the lease's token is %d now: %w", r, want, cur, store.ErrFenced)
		}
	}
	return nil
}
