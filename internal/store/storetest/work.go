package storetest

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// The environment work queue (issue 16): the WorkStore contract.

var mgWorkCases = []mgCase{
	{"EnsureCreatesOnce", testWorkEnsure},
	{"EnsureRaceCreatesOne", testWorkEnsureRace},
	{"ClaimOldestAndReclaim", testWorkClaim},
	{"ClaimRaceEachItemOnce", testWorkClaimRace},
	{"AckOnce", testWorkAck},
	{"AckRaceOneWinner", testWorkAckRace},
	{"HeartbeatRaceOneWinner", testWorkHeartbeatRace},
	{"HeartbeatLease", testWorkHeartbeat},
	{"HeartbeatTokensIncrease", testWorkTokensIncrease},
	{"LapsedLeaseRequeued", testWorkLapsedLease},
	{"LapsedStoppingStopped", testWorkLapsedStopping},
	{"Stop", testWorkStop},
	{"StopSessionWork", testWorkStopSession},
	{"Scoped", testWorkScoped},
	{"Metadata", testWorkMetadata},
	{"ListNewestFirst", testWorkList},
	{"Stats", testWorkStats},
}

const (
	workEnv      = "env_work"
	workTTL      = 30 * time.Second
	workReclaim  = 10 * time.Minute
	workWorker   = "worker-1"
	workWorkerB  = "worker-2"
	workOtherEnv = "env_other"
)

// workAt is a fixed, microsecond-aligned instant plus d.
func workAt(d time.Duration) time.Time {
	return time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Add(d)
}

func (e *mgEnv) ensureWork(session string, created time.Time) *store.WorkItem {
	e.t.Helper()
	w, fresh, err := e.s.EnsureSessionWork(e.ctx, store.WorkItem{TenantID: mgTenant, EnvironmentID: workEnv,
		SessionID: session, CreatedAt: created})
	mustOK(e.t, err, fmt.Sprintf("EnsureSessionWork(%q)", session))
	if !fresh {
		e.t.Fatalf("EnsureSessionWork(%q): created false for a session without work", session)
	}
	return w
}

func (e *mgEnv) claimWork(worker string, now time.Time, reclaim time.Duration) (*store.WorkItem, error) {
	return e.s.ClaimWork(e.ctx, store.ClaimWorkParams{TenantID: mgTenant, EnvironmentID: workEnv, WorkerID: worker,
		Now: now, ReclaimOlderThan: reclaim})
}

func (e *mgEnv) mustClaim(worker string, now time.Time, wantID string) *store.WorkItem {
	e.t.Helper()
	w, err := e.claimWork(worker, now, workReclaim)
	mustOK(e.t, err, fmt.Sprintf("ClaimWork at %v", now))
	equal(e.t, "claimed item", w.ID, wantID)
	return w
}

func (e *mgEnv) getWork(id string) *store.WorkItem {
	e.t.Helper()
	w, err := e.s.GetWork(e.ctx, mgTenant, workEnv, id)
	mustOK(e.t, err, fmt.Sprintf("GetWork(%q)", id))
	return w
}

func (e *mgEnv) ackWork(id string, now time.Time) *store.WorkItem {
	e.t.Helper()
	w, err := e.s.AckWork(e.ctx, mgTenant, workEnv, id, now, workTTL)
	mustOK(e.t, err, fmt.Sprintf("AckWork(%q)", id))
	return w
}

func (e *mgEnv) heartbeat(id, expected string, now time.Time) (*store.WorkItem, error) {
	return e.s.HeartbeatWork(e.ctx, store.HeartbeatWorkParams{TenantID: mgTenant, EnvironmentID: workEnv, ID: id,
		Expected: expected, Now: now, TTL: workTTL})
}

func (e *mgEnv) mustHeartbeat(id, expected string, now time.Time) *store.WorkItem {
	e.t.Helper()
	w, err := e.heartbeat(id, expected, now)
	mustOK(e.t, err, fmt.Sprintf("HeartbeatWork(%q, %q)", id, expected))
	return w
}

// leaseLost checks err is a *LeaseLostError (and ErrLeaseLost) and returns
// the item it carries.
func leaseLost(e *mgEnv, what string, err error) *store.WorkItem {
	e.t.Helper()
	var lle *store.LeaseLostError
	if !errors.As(err, &lle) || !errors.Is(err, store.ErrLeaseLost) {
		e.t.Fatalf("%s: got %v, want a *LeaseLostError", what, err)
	}
	if lle.Current == nil {
		e.t.Fatalf("%s: LeaseLostError without the current item", what)
	}
	return lle.Current
}

func timeIs(e *mgEnv, what string, got *time.Time, want time.Time) {
	e.t.Helper()
	if got == nil || !got.Equal(want) {
		e.t.Fatalf("%s: got %v, want %v", what, got, want)
	}
	mgUTC(e.t, what, *got)
}

func timeNil(e *mgEnv, what string, got *time.Time) {
	e.t.Helper()
	if got != nil {
		e.t.Fatalf("%s: got %v, want none", what, *got)
	}
}

func tokenTime(e *mgEnv, tok string) time.Time {
	e.t.Helper()
	v, err := time.Parse(time.RFC3339Nano, tok)
	if err != nil {
		e.t.Fatalf("lease token %q is not RFC 3339: %v", tok, err)
	}
	return v
}

// EnsureSessionWork queues one item per session and returns the live one
// on later calls.
func testWorkEnsure(e *mgEnv) {
	w, created, err := e.s.EnsureSessionWork(e.ctx, store.WorkItem{TenantID: mgTenant, EnvironmentID: workEnv,
		SessionID: "sesn_w1", Metadata: map[string]string{"k": "v"}})
	mustOK(e.t, err, "EnsureSessionWork")
	equal(e.t, "created", created, true)
	mgHasPrefix(e.t, "work id", w.ID, "work")
	equal(e.t, "state", w.State, store.WorkQueued)
	equal(e.t, "tenant", w.TenantID, mgTenant)
	equal(e.t, "environment", w.EnvironmentID, workEnv)
	equal(e.t, "session", w.SessionID, "sesn_w1")
	equal(e.t, "metadata", fmt.Sprint(w.Metadata), "map[k:v]")
	mgUTC(e.t, "CreatedAt", w.CreatedAt)
	if w.CreatedAt.IsZero() || w.PolledAt != nil || w.AckedAt != nil || w.LeaseToken != "" || w.StoppedAt != nil {
		e.t.Fatalf("new item: %+v", w)
	}

	again, created, err := e.s.EnsureSessionWork(e.ctx, store.WorkItem{TenantID: mgTenant, EnvironmentID: workEnv,
		SessionID: "sesn_w1"})
	mustOK(e.t, err, "EnsureSessionWork again")
	equal(e.t, "created again", created, false)
	equal(e.t, "live item", again.ID, w.ID)
	equal(e.t, "live item's metadata", fmt.Sprint(again.Metadata), "map[k:v]")

	got := e.getWork(w.ID)
	if !got.CreatedAt.Equal(w.CreatedAt) {
		e.t.Fatalf("CreatedAt: ensure said %v, get says %v", w.CreatedAt, got.CreatedAt)
	}
	empty, _, err := e.s.EnsureSessionWork(e.ctx, store.WorkItem{TenantID: mgTenant, EnvironmentID: workEnv, SessionID: "sesn_w2"})
	mustOK(e.t, err, "EnsureSessionWork without metadata")
	if empty.Metadata == nil || len(empty.Metadata) != 0 {
		e.t.Fatalf("metadata of an item made without any: %#v, want an empty map", empty.Metadata)
	}
	_, _, err = e.s.EnsureSessionWork(e.ctx, store.WorkItem{TenantID: mgTenant, EnvironmentID: workEnv})
	mustErrIs(e.t, err, store.ErrInvalid, "EnsureSessionWork without a session")
	_, _, err = e.s.EnsureSessionWork(e.ctx, store.WorkItem{ID: w.ID, TenantID: mgTenant, EnvironmentID: workEnv, SessionID: "sesn_w3"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "EnsureSessionWork with a taken id")
}

// A poll hands out the oldest claimable item and records the poll; a
// polled item is not handed out again within the reclaim age, and is once
// it has passed.
func testWorkClaim(e *mgEnv) {
	_, err := e.claimWork(workWorker, workAt(0), workReclaim)
	mustErrIs(e.t, err, store.ErrNotFound, "ClaimWork of an empty queue")
	c := e.ensureWork("sesn_c", workAt(2*time.Second))
	a := e.ensureWork("sesn_a", workAt(0))
	b := e.ensureWork("sesn_b", workAt(time.Second))

	now := workAt(time.Minute)
	got := e.mustClaim(workWorker, now, a.ID)
	timeIs(e, "PolledAt", got.PolledAt, now)
	equal(e.t, "PolledBy", got.PolledBy, workWorker)
	equal(e.t, "state after a poll", got.State, store.WorkQueued)
	stored := e.getWork(a.ID)
	timeIs(e, "stored PolledAt", stored.PolledAt, now)
	equal(e.t, "stored PolledBy", stored.PolledBy, workWorker)

	e.mustClaim(workWorkerB, now, b.ID)
	e.mustClaim(workWorker, now, c.ID)
	_, err = e.claimWork(workWorker, now.Add(workReclaim-time.Microsecond), workReclaim)
	mustErrIs(e.t, err, store.ErrNotFound, "ClaimWork within the reclaim age")

	again := e.mustClaim(workWorkerB, now.Add(workReclaim), a.ID)
	timeIs(e, "PolledAt of the second poll", again.PolledAt, now.Add(workReclaim))
	equal(e.t, "PolledBy of the second poll", again.PolledBy, workWorkerB)

	_, err = e.s.ClaimWork(e.ctx, store.ClaimWorkParams{TenantID: mgTenant, EnvironmentID: workOtherEnv, WorkerID: workWorker,
		Now: now.Add(time.Hour), ReclaimOlderThan: workReclaim})
	mustErrIs(e.t, err, store.ErrNotFound, "ClaimWork of another environment")
	_, err = e.s.ClaimWork(e.ctx, store.ClaimWorkParams{TenantID: mgOtherTenant, EnvironmentID: workEnv, WorkerID: workWorker,
		Now: now.Add(time.Hour), ReclaimOlderThan: workReclaim})
	mustErrIs(e.t, err, store.ErrNotFound, "ClaimWork of another tenant")
}

// An ack takes a queued item to starting with a lease; a second ack is a
// conflict.
func testWorkAck(e *mgEnv) {
	w := e.ensureWork("sesn_ack", workAt(0))
	e.mustClaim(workWorker, workAt(time.Second), w.ID)
	acked := e.ackWork(w.ID, workAt(2*time.Second))
	equal(e.t, "state", acked.State, store.WorkStarting)
	timeIs(e, "AckedAt", acked.AckedAt, workAt(2*time.Second))
	timeIs(e, "LeaseExpiresAt", acked.LeaseExpiresAt, workAt(2*time.Second+workTTL))
	equal(e.t, "LeaseToken", acked.LeaseToken, "")
	timeNil(e, "StartedAt", acked.StartedAt)
	equal(e.t, "stored state", e.getWork(w.ID).State, store.WorkStarting)

	_, err := e.s.AckWork(e.ctx, mgTenant, workEnv, w.ID, workAt(3*time.Second), workTTL)
	mustErrIs(e.t, err, store.ErrConflict, "AckWork twice")
	_, err = e.claimWork(workWorkerB, workAt(10*time.Second), time.Second)
	mustErrIs(e.t, err, store.ErrNotFound, "ClaimWork of an acked item whose lease holds")
	_, err = e.s.AckWork(e.ctx, mgTenant, workEnv, "work_missing", workAt(0), workTTL)
	mustErrIs(e.t, err, store.ErrNotFound, "AckWork(unknown)")
}

// Heartbeats: "" after the ack gets the first token (starting → active);
// each later one names the last token; an old token, or one of an item
// never acked, is a lost lease carrying the item as it is.
func testWorkHeartbeat(e *mgEnv) {
	w := e.ensureWork("sesn_hb", workAt(0))
	_, err := e.heartbeat(w.ID, "", workAt(time.Second))
	cur := leaseLost(e, "HeartbeatWork of a queued item", err)
	equal(e.t, "current state", cur.State, store.WorkQueued)

	e.ackWork(w.ID, workAt(time.Second))
	first := e.mustHeartbeat(w.ID, "", workAt(2*time.Second))
	equal(e.t, "state after the first heartbeat", first.State, store.WorkActive)
	if first.LeaseToken == "" {
		e.t.Fatal("the first heartbeat returned no token")
	}
	equal(e.t, "token", first.LeaseToken, workAt(2*time.Second).Format(time.RFC3339Nano))
	timeIs(e, "StartedAt", first.StartedAt, workAt(2*time.Second))
	timeIs(e, "HeartbeatAt", first.HeartbeatAt, workAt(2*time.Second))
	timeIs(e, "LeaseExpiresAt", first.LeaseExpiresAt, workAt(2*time.Second+workTTL))

	_, err = e.heartbeat(w.ID, "", workAt(3*time.Second))
	cur = leaseLost(e, "HeartbeatWork with no token after the first", err)
	equal(e.t, "current token", cur.LeaseToken, first.LeaseToken)

	second := e.mustHeartbeat(w.ID, first.LeaseToken, workAt(4*time.Second))
	equal(e.t, "state", second.State, store.WorkActive)
	timeIs(e, "StartedAt stays the first heartbeat's", second.StartedAt, workAt(2*time.Second))
	timeIs(e, "HeartbeatAt", second.HeartbeatAt, workAt(4*time.Second))
	timeIs(e, "LeaseExpiresAt", second.LeaseExpiresAt, workAt(4*time.Second+workTTL))

	_, err = e.heartbeat(w.ID, first.LeaseToken, workAt(5*time.Second))
	cur = leaseLost(e, "HeartbeatWork with the old token", err)
	equal(e.t, "current token", cur.LeaseToken, second.LeaseToken)
	equal(e.t, "current state", cur.State, store.WorkActive)
	stored := e.getWork(w.ID)
	equal(e.t, "stored token after a lost heartbeat", stored.LeaseToken, second.LeaseToken)
	timeIs(e, "stored lease after a lost heartbeat", stored.LeaseExpiresAt, workAt(4*time.Second+workTTL))
	_, err = e.heartbeat("work_missing", "", workAt(5*time.Second))
	mustErrIs(e.t, err, store.ErrNotFound, "HeartbeatWork(unknown)")
}

// Tokens strictly increase even when heartbeats carry one time, or an
// earlier one.
func testWorkTokensIncrease(e *mgEnv) {
	w := e.ensureWork("sesn_tok", workAt(0))
	e.ackWork(w.ID, workAt(0))
	now := workAt(time.Second)
	tok := e.mustHeartbeat(w.ID, "", now).LeaseToken
	for i, at := range []time.Time{now, now, now.Add(-time.Second), now.Add(time.Nanosecond)} {
		next := e.mustHeartbeat(w.ID, tok, at).LeaseToken
		if !tokenTime(e, next).After(tokenTime(e, tok)) {
			e.t.Fatalf("heartbeat %d at %v: token %q is not after %q", i, at, next, tok)
		}
		tok = next
	}
}

// A lease that lapsed is ended by the next poll of the environment: the
// item is queued again, handed out, and the old holder's heartbeat is a
// lost lease.
func testWorkLapsedLease(e *mgEnv) {
	w := e.ensureWork("sesn_lapse", workAt(0))
	e.mustClaim(workWorker, workAt(time.Second), w.ID)
	e.ackWork(w.ID, workAt(time.Second))
	tok := e.mustHeartbeat(w.ID, "", workAt(2*time.Second)).LeaseToken

	_, err := e.claimWork(workWorkerB, workAt(2*time.Second+workTTL-time.Microsecond), workReclaim)
	mustErrIs(e.t, err, store.ErrNotFound, "ClaimWork before the lease lapsed")
	equal(e.t, "state while the lease holds", e.getWork(w.ID).State, store.WorkActive)

	later := workAt(2*time.Second + workTTL)
	got := e.mustClaim(workWorkerB, later, w.ID)
	equal(e.t, "state of the re-queued item", got.State, store.WorkQueued)
	equal(e.t, "PolledBy", got.PolledBy, workWorkerB)
	timeIs(e, "PolledAt", got.PolledAt, later)
	equal(e.t, "LeaseToken", got.LeaseToken, "")
	timeNil(e, "AckedAt", got.AckedAt)
	timeNil(e, "LeaseExpiresAt", got.LeaseExpiresAt)

	_, err = e.heartbeat(w.ID, tok, later)
	cur := leaseLost(e, "HeartbeatWork of the old holder", err)
	equal(e.t, "current state", cur.State, store.WorkQueued)

	acked := e.ackWork(w.ID, later)
	equal(e.t, "state after the new ack", acked.State, store.WorkStarting)
	next := e.mustHeartbeat(w.ID, "", later)
	equal(e.t, "state after the new holder's heartbeat", next.State, store.WorkActive)
}

// A stopping item whose lease lapsed is stopped by the next poll; while
// its lease holds, a heartbeat extends it and it stays stopping.
func testWorkLapsedStopping(e *mgEnv) {
	w := e.ensureWork("sesn_stopping", workAt(0))
	e.ackWork(w.ID, workAt(0))
	tok := e.mustHeartbeat(w.ID, "", workAt(time.Second)).LeaseToken
	stopping, err := e.s.StopWork(e.ctx, mgTenant, workEnv, w.ID, false, workAt(2*time.Second))
	mustOK(e.t, err, "StopWork")
	equal(e.t, "state", stopping.State, store.WorkStopping)
	timeIs(e, "StopRequestedAt", stopping.StopRequestedAt, workAt(2*time.Second))
	timeNil(e, "StoppedAt", stopping.StoppedAt)
	again, err := e.s.StopWork(e.ctx, mgTenant, workEnv, w.ID, false, workAt(3*time.Second))
	mustOK(e.t, err, "StopWork of a stopping item")
	equal(e.t, "state after a second stop", again.State, store.WorkStopping)
	timeIs(e, "StopRequestedAt stays the first", again.StopRequestedAt, workAt(2*time.Second))

	beat := e.mustHeartbeat(w.ID, tok, workAt(4*time.Second))
	equal(e.t, "state after a heartbeat", beat.State, store.WorkStopping)
	expires := workAt(4*time.Second + workTTL)
	timeIs(e, "extended lease", beat.LeaseExpiresAt, expires)

	_, err = e.claimWork(workWorker, expires, workReclaim)
	mustErrIs(e.t, err, store.ErrNotFound, "ClaimWork (nothing queued)")
	got := e.getWork(w.ID)
	equal(e.t, "state after the poll", got.State, store.WorkStopped)
	timeIs(e, "StoppedAt", got.StoppedAt, expires)
}

// Stops: force or an unacked item → stopped; an acked one → stopping; a
// stopped one → conflict. A heartbeat of a stopped item returns it.
func testWorkStop(e *mgEnv) {
	acked := e.ensureWork("sesn_s1", workAt(0))
	e.ackWork(acked.ID, workAt(0))
	tok := e.mustHeartbeat(acked.ID, "", workAt(time.Second)).LeaseToken
	stopped, err := e.s.StopWork(e.ctx, mgTenant, workEnv, acked.ID, true, workAt(2*time.Second))
	mustOK(e.t, err, "StopWork(force)")
	equal(e.t, "state", stopped.State, store.WorkStopped)
	timeIs(e, "StoppedAt", stopped.StoppedAt, workAt(2*time.Second))
	_, err = e.s.StopWork(e.ctx, mgTenant, workEnv, acked.ID, true, workAt(3*time.Second))
	mustErrIs(e.t, err, store.ErrConflict, "StopWork(force) of a stopped item")
	_, err = e.s.StopWork(e.ctx, mgTenant, workEnv, acked.ID, false, workAt(3*time.Second))
	mustErrIs(e.t, err, store.ErrConflict, "StopWork of a stopped item")
	beat, err := e.heartbeat(acked.ID, tok, workAt(4*time.Second))
	mustOK(e.t, err, "HeartbeatWork of a stopped item")
	equal(e.t, "heartbeat of a stopped item: state", beat.State, store.WorkStopped)
	equal(e.t, "heartbeat of a stopped item: token unchanged", beat.LeaseToken, tok)
	timeIs(e, "heartbeat of a stopped item: HeartbeatAt unchanged", beat.HeartbeatAt, workAt(time.Second))

	graceful := e.ensureWork("sesn_s2", workAt(0))
	e.ackWork(graceful.ID, workAt(0))
	got, err := e.s.StopWork(e.ctx, mgTenant, workEnv, graceful.ID, false, workAt(time.Second))
	mustOK(e.t, err, "StopWork of an acked item")
	equal(e.t, "state", got.State, store.WorkStopping)

	polled := e.ensureWork("sesn_s3", workAt(0))
	e.mustClaim(workWorker, workAt(time.Second), polled.ID)
	got, err = e.s.StopWork(e.ctx, mgTenant, workEnv, polled.ID, false, workAt(2*time.Second))
	mustOK(e.t, err, "StopWork of a polled, unacked item")
	equal(e.t, "state", got.State, store.WorkStopped)
	_, err = e.s.StopWork(e.ctx, mgTenant, workEnv, "work_missing", true, workAt(0))
	mustErrIs(e.t, err, store.ErrNotFound, "StopWork(unknown)")
}

// StopSessionWork stops the session's live item; the next
// EnsureSessionWork makes a fresh one.
func testWorkStopSession(e *mgEnv) {
	mustOK(e.t, e.s.StopSessionWork(e.ctx, "sesn_none", workAt(0)), "StopSessionWork without work")
	w := e.ensureWork("sesn_end", workAt(0))
	e.ackWork(w.ID, workAt(0))
	mustOK(e.t, e.s.StopSessionWork(e.ctx, "sesn_end", workAt(time.Second)), "StopSessionWork")
	got := e.getWork(w.ID)
	equal(e.t, "state", got.State, store.WorkStopped)
	timeIs(e, "StoppedAt", got.StoppedAt, workAt(time.Second))
	mustOK(e.t, e.s.StopSessionWork(e.ctx, "sesn_end", workAt(2*time.Second)), "StopSessionWork again")
	timeIs(e, "StoppedAt after a second stop", e.getWork(w.ID).StoppedAt, workAt(time.Second))

	fresh := e.ensureWork("sesn_end", workAt(3*time.Second))
	if fresh.ID == w.ID {
		e.t.Fatal("EnsureSessionWork returned the stopped item")
	}
	equal(e.t, "fresh item's state", fresh.State, store.WorkQueued)
}

// Every lookup is scoped to (tenant, environment).
func testWorkScoped(e *mgEnv) {
	w := e.ensureWork("sesn_scope", workAt(0))
	for _, sc := range []struct{ tenant, env string }{{mgOtherTenant, workEnv}, {mgTenant, workOtherEnv}} {
		what := func(op string) string { return fmt.Sprintf("%s as (%s, %s)", op, sc.tenant, sc.env) }
		_, err := e.s.GetWork(e.ctx, sc.tenant, sc.env, w.ID)
		mustErrIs(e.t, err, store.ErrNotFound, what("GetWork"))
		_, err = e.s.AckWork(e.ctx, sc.tenant, sc.env, w.ID, workAt(0), workTTL)
		mustErrIs(e.t, err, store.ErrNotFound, what("AckWork"))
		_, err = e.s.HeartbeatWork(e.ctx, store.HeartbeatWorkParams{TenantID: sc.tenant, EnvironmentID: sc.env, ID: w.ID,
			Now: workAt(0), TTL: workTTL})
		mustErrIs(e.t, err, store.ErrNotFound, what("HeartbeatWork"))
		_, err = e.s.StopWork(e.ctx, sc.tenant, sc.env, w.ID, true, workAt(0))
		mustErrIs(e.t, err, store.ErrNotFound, what("StopWork"))
		_, err = e.s.UpdateWorkMetadata(e.ctx, sc.tenant, sc.env, w.ID, map[string]*string{"k": ptr("v")})
		mustErrIs(e.t, err, store.ErrNotFound, what("UpdateWorkMetadata"))
		list, err := e.s.ListWork(e.ctx, sc.tenant, sc.env, "", 10)
		mustOK(e.t, err, what("ListWork"))
		equal(e.t, what("listed items"), len(list), 0)
		st, err := e.s.WorkStats(e.ctx, sc.tenant, sc.env, workAt(0), workReclaim)
		mustOK(e.t, err, what("WorkStats"))
		equal(e.t, what("depth"), st.Depth, int64(0))
	}
	got := e.getWork(w.ID)
	equal(e.t, "item untouched: state", got.State, store.WorkQueued)
	equal(e.t, "item untouched: metadata", len(got.Metadata), 0)
}

// A metadata patch sets keys and deletes those with a nil value.
func testWorkMetadata(e *mgEnv) {
	w, _, err := e.s.EnsureSessionWork(e.ctx, store.WorkItem{TenantID: mgTenant, EnvironmentID: workEnv,
		SessionID: "sesn_meta", Metadata: map[string]string{"a": "1", "b": "2"}})
	mustOK(e.t, err, "EnsureSessionWork")
	got, err := e.s.UpdateWorkMetadata(e.ctx, mgTenant, workEnv, w.ID, map[string]*string{"b": nil, "c": ptr("3"), "a": ptr("one")})
	mustOK(e.t, err, "UpdateWorkMetadata")
	equal(e.t, "patched metadata", fmt.Sprint(got.Metadata), "map[a:one c:3]")
	equal(e.t, "stored metadata", fmt.Sprint(e.getWork(w.ID).Metadata), "map[a:one c:3]")
	got, err = e.s.UpdateWorkMetadata(e.ctx, mgTenant, workEnv, w.ID, map[string]*string{"a": nil, "c": nil, "gone": nil})
	mustOK(e.t, err, "UpdateWorkMetadata deleting every key")
	equal(e.t, "metadata after deleting every key", len(got.Metadata), 0)
	_, err = e.s.UpdateWorkMetadata(e.ctx, mgTenant, workEnv, "work_missing", nil)
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateWorkMetadata(unknown)")
}

// ListWork pages newest first; the cursor is the last item's id.
func testWorkList(e *mgEnv) {
	var ids []string
	for i := range 5 {
		ids = append(ids, e.ensureWork(fmt.Sprintf("sesn_l%d", i), workAt(time.Duration(i)*time.Second)).ID)
	}
	// Two items created at one instant: the larger id comes first.
	tieA, _, err := e.s.EnsureSessionWork(e.ctx, store.WorkItem{ID: "work_tie_a", TenantID: mgTenant, EnvironmentID: workEnv,
		SessionID: "sesn_tie_a", CreatedAt: workAt(10 * time.Second)})
	mustOK(e.t, err, "EnsureSessionWork(tie a)")
	tieB, _, err := e.s.EnsureSessionWork(e.ctx, store.WorkItem{ID: "work_tie_b", TenantID: mgTenant, EnvironmentID: workEnv,
		SessionID: "sesn_tie_b", CreatedAt: workAt(10 * time.Second)})
	mustOK(e.t, err, "EnsureSessionWork(tie b)")
	_, _, err = e.s.EnsureSessionWork(e.ctx, store.WorkItem{TenantID: mgTenant, EnvironmentID: workOtherEnv,
		SessionID: "sesn_elsewhere", CreatedAt: workAt(20 * time.Second)})
	mustOK(e.t, err, "EnsureSessionWork(other environment)")

	workID := func(w *store.WorkItem) string { return w.ID }
	var pages [][]string
	after := ""
	for {
		list, err := e.s.ListWork(e.ctx, mgTenant, workEnv, after, 3)
		page := mgIDs(e.t, "ListWork", list, err, workID)
		if len(page) == 0 {
			break
		}
		pages = append(pages, page)
		after = page[len(page)-1]
	}
	equal(e.t, "pages", fmt.Sprint(pages), fmt.Sprint([][]string{{tieB.ID, tieA.ID, ids[4]}, {ids[3], ids[2], ids[1]}, {ids[0]}}))
	_, err = e.s.ListWork(e.ctx, mgTenant, workEnv, "work_missing", 3)
	mustErrIs(e.t, err, store.ErrNotFound, "ListWork after an unknown cursor")
}

// WorkStats: depth counts queued items nobody holds, pending those polled
// within the reclaim age; acked and stopped items are in neither.
func testWorkStats(e *mgEnv) {
	now := workAt(3 * time.Hour)
	st, err := e.s.WorkStats(e.ctx, mgTenant, workEnv, now, workReclaim)
	mustOK(e.t, err, "WorkStats of an empty queue")
	if st.Depth != 0 || st.Pending != 0 || st.OldestQueuedAt != nil {
		e.t.Fatalf("stats of an empty queue: %+v", st)
	}
	acked := e.ensureWork("sesn_st_acked", workAt(0))
	stale := e.ensureWork("sesn_st_stale", workAt(time.Second))
	pending := e.ensureWork("sesn_st_pending", workAt(2*time.Second))
	e.ensureWork("sesn_st_fresh", workAt(3*time.Second))
	stopped := e.ensureWork("sesn_st_stopped", workAt(4*time.Second))
	_, err = e.s.StopWork(e.ctx, mgTenant, workEnv, stopped.ID, true, workAt(4*time.Second))
	mustOK(e.t, err, "StopWork")

	e.mustClaim(workWorker, now.Add(-time.Hour), acked.ID)
	_, err = e.s.AckWork(e.ctx, mgTenant, workEnv, acked.ID, now.Add(-time.Hour), 24*time.Hour)
	mustOK(e.t, err, "AckWork")
	e.mustClaim(workWorker, now.Add(-time.Hour), stale.ID)
	got, err := e.claimWork(workWorker, now.Add(-time.Minute), 2*time.Hour)
	mustOK(e.t, err, "ClaimWork")
	equal(e.t, "claimed", got.ID, pending.ID)

	st, err = e.s.WorkStats(e.ctx, mgTenant, workEnv, now, workReclaim)
	mustOK(e.t, err, "WorkStats")
	equal(e.t, "Depth (never polled, polled an hour ago)", st.Depth, int64(2))
	equal(e.t, "Pending (polled a minute ago)", st.Pending, int64(1))
	timeIs(e, "OldestQueuedAt", st.OldestQueuedAt, workAt(time.Second))
}
