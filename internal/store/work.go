package store

import (
	"context"
	"errors"
	"time"
)

// This file holds the environment work queue (issue 16): the work items of
// self_hosted environments that workers on other hosts poll, ack, keep
// leased with heartbeats and stop, as the official SDK's
// lib/environments worker does. Every transition is one transaction in the
// engine, so two workers polling at once never claim one item, and a
// stale lease token never extends a lease.

// Work item states, as the SDK's BetaSelfHostedWorkState names them.
const (
	WorkQueued   = "queued"   // waiting for a worker (or polled and not yet acked)
	WorkStarting = "starting" // acked; no heartbeat yet
	WorkActive   = "active"   // heartbeating
	WorkStopping = "stopping" // a graceful stop was asked for
	WorkStopped  = "stopped"  // final
)

// ErrLeaseLost: a heartbeat named a lease token the item no longer has
// (its lease lapsed and it was re-queued, or another worker holds it).
// The engine returns it wrapped with the item's current state readable
// through errors.As on *LeaseLostError.
var ErrLeaseLost = errors.New("lease precondition failed")

// LeaseLostError carries the item as it is now, for the 412 answer.
type LeaseLostError struct{ Current *WorkItem }

func (e *LeaseLostError) Error() string { return ErrLeaseLost.Error() }
func (e *LeaseLostError) Unwrap() error { return ErrLeaseLost }

// WorkItem is one unit of work of a self_hosted environment: serving one
// session until the worker stops it.
type WorkItem struct {
	ID            string // "work_…"
	TenantID      string
	EnvironmentID string
	SessionID     string
	State         string
	Metadata      map[string]string
	CreatedAt     time.Time
	// PolledAt/PolledBy: the last poll that handed the item out (a queued
	// item polled and not acked within the reclaim age is handed out again).
	PolledAt *time.Time
	PolledBy string
	// AckedAt: the ack (queued → starting).
	AckedAt *time.Time
	// StartedAt: the first heartbeat (starting → active).
	StartedAt *time.Time
	// HeartbeatAt is the last heartbeat; LeaseToken the value it returned
	// (the next heartbeat's expected_last_heartbeat; "" before the first).
	HeartbeatAt *time.Time
	LeaseToken  string
	// LeaseExpiresAt: an acked item whose lease passed this goes back to
	// the queue (a stopping one to stopped) at the next poll of its
	// environment.
	LeaseExpiresAt  *time.Time
	StopRequestedAt *time.Time
	StoppedAt       *time.Time
}

// ClaimWorkParams is one poll.
type ClaimWorkParams struct {
	TenantID      string
	EnvironmentID string
	WorkerID      string
	Now           time.Time
	// ReclaimOlderThan: a queued item polled this long ago (or longer)
	// without an ack may be handed out again.
	ReclaimOlderThan time.Duration
}

// HeartbeatWorkParams extends a lease.
type HeartbeatWorkParams struct {
	TenantID, EnvironmentID, ID string
	// Expected is the lease token the worker holds ("" for none: the
	// first heartbeat after the ack).
	Expected string
	Now      time.Time
	TTL      time.Duration
}

// WorkStats is a queue's state.
type WorkStats struct {
	// Depth: queued items nobody holds (never polled, or polled longer
	// ago than the reclaim age).
	Depth int64
	// Pending: queued items polled within the reclaim age, not yet acked.
	Pending int64
	// OldestQueuedAt: the oldest queued item's creation (nil: none).
	OldestQueuedAt *time.Time
}

// WorkStore is the environment work queue. Every id lookup is scoped to
// (tenant, environment): another tenant's or environment's item is
// ErrNotFound.
type WorkStore interface {
	// EnsureSessionWork queues a new item for the session unless it has
	// one that is not stopped; it returns the live item either way
	// (created says which). At most one item per session is ever live.
	EnsureSessionWork(ctx context.Context, w WorkItem) (item *WorkItem, created bool, err error)
	// ClaimWork is a poll: in one transaction it ends the lapsed leases of
	// the environment (acked items back to queued with their lease, poll,
	// ack, start and heartbeat cleared: the next worker starts afresh;
	// stopping ones to stopped), then hands out the oldest
	// claimable queued item, recording the poll. ErrNotFound: none.
	ClaimWork(ctx context.Context, p ClaimWorkParams) (*WorkItem, error)
	// AckWork: queued → starting, with a lease of ttl. ErrConflict when the
	// item is not queued.
	AckWork(ctx context.Context, tenantID, envID, id string, now time.Time, ttl time.Duration) (*WorkItem, error)
	// HeartbeatWork: when Expected is the item's token (and the item is
	// acked), a new token (strictly after the old one), HeartbeatAt=Now,
	// lease to Now+TTL, starting → active. A stopped item is returned
	// unchanged (the caller answers lease_extended false). A token that
	// does not match, or an item back in the queue: *LeaseLostError.
	HeartbeatWork(ctx context.Context, p HeartbeatWorkParams) (*WorkItem, error)
	// StopWork: force (or an item no worker acked) → stopped; else →
	// stopping. ErrConflict when it is stopped already.
	StopWork(ctx context.Context, tenantID, envID, id string, force bool, now time.Time) (*WorkItem, error)
	// StopSessionWork stops the session's live item, if any (the session
	// ended).
	StopSessionWork(ctx context.Context, sessionID string, now time.Time) error
	GetWork(ctx context.Context, tenantID, envID, id string) (*WorkItem, error)
	// ListWork lists the environment's items newest first, after the
	// cursor (an item id; "" from the start).
	ListWork(ctx context.Context, tenantID, envID, after string, limit int) ([]*WorkItem, error)
	// UpdateWorkMetadata applies a patch: a nil value deletes the key.
	UpdateWorkMetadata(ctx context.Context, tenantID, envID, id string, patch map[string]*string) (*WorkItem, error)
	// WorkStats counts the environment's queue at now.
	WorkStats(ctx context.Context, tenantID, envID string, now time.Time, reclaimAge time.Duration) (WorkStats, error)
}

// NextLeaseToken is the token a heartbeat at now hands out after old: now
// as RFC 3339 with nanoseconds in UTC, or old's time plus 1ns when now is
// not after it, so an item's tokens strictly increase even when clocks tie
// or step back.
func NextLeaseToken(old string, now time.Time) string {
	next := now.UTC()
	if prev, err := time.Parse(time.RFC3339Nano, old); err == nil && !next.After(prev) {
		next = prev.UTC().Add(time.Nanosecond)
	}
	return next.Format(time.RFC3339Nano)
}

// PatchWorkMetadata applies patch to a copy of m: a nil value deletes the
// key. The result is never nil.
func PatchWorkMetadata(m map[string]string, patch map[string]*string) map[string]string {
	out := make(map[string]string, len(m)+len(patch))
	for k, v := range m {
		out[k] = v
	}
	for k, v := range patch {
		if v == nil {
			delete(out, k)
			continue
		}
		out[k] = *v
	}
	return out
}
