package storetest

import (
	"sort"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var mgRunRowCases = []mgCase{
	{"InsertGetRoundTrip", testMgRunRowRoundTrip},
	{"InsertRefusals", testMgRunRowInsertRefusals},
	{"UpdateOnlyByOwner", testMgRunRowUpdate},
	{"DeleteOnlyByOwner", testMgRunRowDelete},
	{"ListAll", testMgRunRowList},
	{"ClaimMany", testMgRunRowClaim},
}

func runRowID(r *store.RunRow) string { return r.SessionID }

func sameRunRow(e *mgEnv, what string, got, want *store.RunRow) {
	e.t.Helper()
	equal(e.t, what+" SessionID", got.SessionID, want.SessionID)
	equal(e.t, what+" TurnSeq", got.TurnSeq, want.TurnSeq)
	equal(e.t, what+" Owner", got.Owner, want.Owner)
	sbSameTime(e.t, what+" LeaseExpiresAt", got.LeaseExpiresAt, want.LeaseExpiresAt)
	equal(e.t, what+" Recovering", got.Recovering, want.Recovering)
	equal(e.t, what+" RecoveryAttempts", got.RecoveryAttempts, want.RecoveryAttempts)
	equal(e.t, what+" LastProgressSeq", got.LastProgressSeq, want.LastProgressSeq)
	sbSameTime(e.t, what+" StartedAt", got.StartedAt, want.StartedAt)
	sbSameTime(e.t, what+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
	mgUTC(e.t, what+" LeaseExpiresAt", got.LeaseExpiresAt)
	mgUTC(e.t, what+" StartedAt", got.StartedAt)
}

func testMgRunRowRoundTrip(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_run"})
	in := store.RunRow{SessionID: s.ID, TurnSeq: 4, Owner: "node-1/boot-a", LeaseExpiresAt: sbAt(30 * time.Second),
		Recovering: true, RecoveryAttempts: 2, LastProgressSeq: 9, StartedAt: sbAt(0), UpdatedAt: sbAt(time.Hour)}
	out := e.runRow(in)
	want := in
	want.UpdatedAt = sbAt(0) // a new row was last updated when it started
	sameRunRow(e, "inserted", out, &want)
	got, err := e.s.GetRunRow(e.ctx, s.ID)
	mustOK(e.t, err, "GetRunRow")
	sameRunRow(e, "read back", got, &want)

	s2 := e.session(store.ManagedSession{ID: "sesn_run2"})
	def := e.runRow(store.RunRow{SessionID: s2.ID, Owner: "node-1/boot-a", LeaseExpiresAt: sbAt(0)})
	if def.StartedAt.IsZero() {
		e.t.Fatal("InsertRunRow left StartedAt zero")
	}
	sbSameTime(e.t, "defaulted UpdatedAt", def.UpdatedAt, def.StartedAt)
	_, err = e.s.GetRunRow(e.ctx, "sesn_none")
	mustErrIs(e.t, err, store.ErrNotFound, "GetRunRow of a session without one")
}

func testMgRunRowInsertRefusals(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_once"})
	e.runRow(store.RunRow{SessionID: s.ID, TurnSeq: 1, Owner: "node-1/boot-a", LeaseExpiresAt: sbAt(0)})
	_, err := e.s.InsertRunRow(e.ctx, &store.RunRow{SessionID: s.ID, TurnSeq: 2, Owner: "node-2/boot-b", LeaseExpiresAt: sbAt(0)})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "InsertRunRow while one exists")
	got, err := e.s.GetRunRow(e.ctx, s.ID)
	mustOK(e.t, err, "GetRunRow")
	equal(e.t, "Owner after the refused insert", got.Owner, "node-1/boot-a")
	equal(e.t, "TurnSeq after the refused insert", got.TurnSeq, int64(1))
	_, err = e.s.InsertRunRow(e.ctx, &store.RunRow{SessionID: "sesn_missing", Owner: "node-1/boot-a", LeaseExpiresAt: sbAt(0)})
	mustErrIs(e.t, err, store.ErrNotFound, "InsertRunRow for an unknown session")
	s2 := e.session(store.ManagedSession{ID: "sesn_noowner"})
	_, err = e.s.InsertRunRow(e.ctx, &store.RunRow{SessionID: s2.ID, LeaseExpiresAt: sbAt(0)})
	mustErrIs(e.t, err, store.ErrInvalid, "InsertRunRow without an Owner")
}

func testMgRunRowUpdate(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_upd"})
	row := e.runRow(store.RunRow{SessionID: s.ID, TurnSeq: 3, Owner: "node-1/boot-a", LeaseExpiresAt: sbAt(0), StartedAt: sbAt(0)})

	renew := *row
	renew.LeaseExpiresAt, renew.LastProgressSeq = sbAt(time.Minute), 5
	// TurnSeq and StartedAt belong to the turn: an update does not move them.
	renew.TurnSeq, renew.StartedAt = 99, sbAt(time.Hour)
	out, err := e.s.UpdateRunRow(e.ctx, &renew, "node-1/boot-a")
	mustOK(e.t, err, "UpdateRunRow by its owner")
	want := store.RunRow{SessionID: s.ID, TurnSeq: 3, Owner: "node-1/boot-a", LeaseExpiresAt: sbAt(time.Minute),
		LastProgressSeq: 5, StartedAt: sbAt(0), UpdatedAt: out.UpdatedAt}
	sameRunRow(e, "renewed", out, &want)
	if out.UpdatedAt.Equal(sbAt(0)) {
		e.t.Fatal("UpdateRunRow did not set UpdatedAt")
	}

	// Recovery takes the turn over by changing Owner.
	take := *out
	take.Owner, take.Recovering, take.RecoveryAttempts = "node-2/boot-b", true, 1
	out, err = e.s.UpdateRunRow(e.ctx, &take, "node-1/boot-a")
	mustOK(e.t, err, "UpdateRunRow taking the turn over")
	equal(e.t, "Owner after takeover", out.Owner, "node-2/boot-b")
	equal(e.t, "Recovering after takeover", out.Recovering, true)
	equal(e.t, "RecoveryAttempts after takeover", out.RecoveryAttempts, int64(1))

	// The old owner has lost the turn: its writes are refused.
	stale := renew
	stale.LeaseExpiresAt = sbAt(time.Hour)
	_, err = e.s.UpdateRunRow(e.ctx, &stale, "node-1/boot-a")
	mustErrIs(e.t, err, store.ErrConflict, "UpdateRunRow by the old owner")
	got, err := e.s.GetRunRow(e.ctx, s.ID)
	mustOK(e.t, err, "GetRunRow")
	sameRunRow(e, "after the refused update", got, out)

	missing := store.RunRow{SessionID: "sesn_missing", Owner: "node-1/boot-a"}
	_, err = e.s.UpdateRunRow(e.ctx, &missing, "node-1/boot-a")
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateRunRow without a run row")
	noOwner := *got
	noOwner.Owner = ""
	_, err = e.s.UpdateRunRow(e.ctx, &noOwner, "node-2/boot-b")
	mustErrIs(e.t, err, store.ErrInvalid, "UpdateRunRow to an empty Owner")
}

func testMgRunRowDelete(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_delrow"})
	e.runRow(store.RunRow{SessionID: s.ID, TurnSeq: 1, Owner: "node-1/boot-a", LeaseExpiresAt: sbAt(0)})
	mustErrIs(e.t, e.s.DeleteRunRow(e.ctx, s.ID, "node-2/boot-b"), store.ErrConflict, "DeleteRunRow by another owner")
	_, err := e.s.GetRunRow(e.ctx, s.ID)
	mustOK(e.t, err, "GetRunRow after the refused delete")
	mustOK(e.t, e.s.DeleteRunRow(e.ctx, s.ID, "node-1/boot-a"), "DeleteRunRow by its owner")
	_, err = e.s.GetRunRow(e.ctx, s.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetRunRow after delete")
	mustErrIs(e.t, e.s.DeleteRunRow(e.ctx, s.ID, "node-1/boot-a"), store.ErrNotFound, "DeleteRunRow twice")
	// The next turn may start.
	e.runRow(store.RunRow{SessionID: s.ID, TurnSeq: 2, Owner: "node-2/boot-b", LeaseExpiresAt: sbAt(0)})
	_, err = e.s.GetManagedSession(e.ctx, s.ID)
	mustOK(e.t, err, "GetManagedSession: deleting the run row keeps the session")
}

func testMgRunRowList(e *mgEnv) {
	for _, id := range []string{"sesn_c", "sesn_a", "sesn_b", "sesn_idle"} {
		e.session(store.ManagedSession{ID: id})
	}
	e.session(store.ManagedSession{ID: "sesn_t2", TenantID: mgOtherTenant})
	rows, err := e.s.ListRunRows(e.ctx)
	mgEqualIDs(e.t, "no run rows", mgIDs(e.t, "ListRunRows", rows, err, runRowID))
	for _, id := range []string{"sesn_c", "sesn_t2", "sesn_a", "sesn_b"} {
		e.runRow(store.RunRow{SessionID: id, Owner: "node-1/boot-a", LeaseExpiresAt: sbAt(0)})
	}
	rows, err = e.s.ListRunRows(e.ctx)
	mgEqualIDs(e.t, "run rows", mgIDs(e.t, "ListRunRows", rows, err, runRowID), "sesn_a", "sesn_b", "sesn_c", "sesn_t2")
	equal(e.t, "listed Owner", rows[0].Owner, "node-1/boot-a")
}

// testMgRunRowClaim: ClaimRunRows takes the rows From owns and skips the
// rest, and counts recovery attempts as UpdateRunRow's callers did: one
// more, or back to one after progress.
func testMgRunRowClaim(e *mgEnv) {
	progress := []string{"agent.message", "agent.tool_use"}
	dead, me := "node-1/boot-dead", "node-1/boot-new"
	// stuck: no progress since its last recovery began (attempt 2 → 3).
	stuck := e.session(store.ManagedSession{ID: "sesn_stuck"})
	evs := e.appendTypes(stuck.ID, "user.message", "session.status_running", "session.status_rescheduled")
	e.runRow(store.RunRow{SessionID: stuck.ID, TurnSeq: evs[0].Seq, Owner: dead, LeaseExpiresAt: sbAt(time.Hour),
		RecoveryAttempts: 2, LastProgressSeq: evs[1].Seq})
	// moved: the model answered after the last recovery (attempt 3 → 1).
	moved := e.session(store.ManagedSession{ID: "sesn_moved"})
	evs = e.appendTypes(moved.ID, "user.message", "session.status_running")
	e.runRow(store.RunRow{SessionID: moved.ID, TurnSeq: evs[0].Seq, Owner: dead, LeaseExpiresAt: sbAt(0),
		RecoveryAttempts: 3, LastProgressSeq: evs[1].Seq})
	e.appendTypes(moved.ID, "agent.message", "session.status_rescheduled")
	// fresh: never recovered, no events after the row's start.
	fresh := e.session(store.ManagedSession{ID: "sesn_fresh"})
	evs = e.appendTypes(fresh.ID, "user.message")
	e.runRow(store.RunRow{SessionID: fresh.ID, TurnSeq: evs[0].Seq, Owner: dead, LeaseExpiresAt: sbAt(0),
		LastProgressSeq: evs[0].Seq})
	// other: someone else's row, named in the claim all the same.
	other := e.session(store.ManagedSession{ID: "sesn_other"})
	otherRow := e.runRow(store.RunRow{SessionID: other.ID, Owner: "node-2/boot-x", LeaseExpiresAt: sbAt(0)})
	// idle: no run row at all.
	idle := e.session(store.ManagedSession{ID: "sesn_idlec"})

	lease := sbAt(time.Minute)
	got, err := e.s.ClaimRunRows(e.ctx, store.RunRowClaim{From: dead, Owner: me, Lease: lease, ProgressTypes: progress,
		SessionIDs: []string{stuck.ID, moved.ID, fresh.ID, other.ID, idle.ID, "sesn_missing"}})
	mustOK(e.t, err, "ClaimRunRows")
	byID := map[string]*store.RunRow{}
	for _, r := range got {
		byID[r.SessionID] = r
	}
	mgEqualIDs(e.t, "claimed", mgIDs(e.t, "ClaimRunRows", sortedRows(got), nil, runRowID), "sesn_fresh", "sesn_moved", "sesn_stuck")
	for id, want := range map[string]struct{ attempts, last int64 }{
		stuck.ID: {3, e.lastSeq(stuck.ID)}, moved.ID: {1, e.lastSeq(moved.ID)}, fresh.ID: {1, e.lastSeq(fresh.ID)},
	} {
		r := byID[id]
		equal(e.t, id+" Owner", r.Owner, me)
		equal(e.t, id+" Recovering", r.Recovering, true)
		equal(e.t, id+" RecoveryAttempts", r.RecoveryAttempts, want.attempts)
		equal(e.t, id+" LastProgressSeq", r.LastProgressSeq, want.last)
		sbSameTime(e.t, id+" LeaseExpiresAt", r.LeaseExpiresAt, lease)
		stored, err := e.s.GetRunRow(e.ctx, id)
		mustOK(e.t, err, "GetRunRow "+id)
		sameRunRow(e, id+" stored", stored, r)
	}
	stored, err := e.s.GetRunRow(e.ctx, other.ID)
	mustOK(e.t, err, "GetRunRow of the row another owner holds")
	sameRunRow(e, "another owner's row", stored, otherRow)

	// The old owner has lost them: a second claim from it takes nothing,
	// and its own writes are refused.
	again, err := e.s.ClaimRunRows(e.ctx, store.RunRowClaim{From: dead, Owner: "node-1/boot-third", Lease: lease,
		ProgressTypes: progress, SessionIDs: []string{stuck.ID, moved.ID, fresh.ID}})
	mustOK(e.t, err, "ClaimRunRows again")
	equal(e.t, "rows claimed twice", len(again), 0)
	stale := *byID[stuck.ID]
	stale.Owner = dead
	_, err = e.s.UpdateRunRow(e.ctx, &stale, dead)
	mustErrIs(e.t, err, store.ErrConflict, "UpdateRunRow by the owner the rows were claimed from")

	none, err := e.s.ClaimRunRows(e.ctx, store.RunRowClaim{From: dead, Owner: me, Lease: lease})
	mustOK(e.t, err, "ClaimRunRows of no session")
	equal(e.t, "rows claimed of none", len(none), 0)
	_, err = e.s.ClaimRunRows(e.ctx, store.RunRowClaim{From: dead, Lease: lease, SessionIDs: []string{stuck.ID}})
	mustErrIs(e.t, err, store.ErrInvalid, "ClaimRunRows to an empty Owner")
}

func sortedRows(rows []*store.RunRow) []*store.RunRow {
	out := append([]*store.RunRow{}, rows...)
	sort.Slice(out, func(i, j int) bool { return out[i].SessionID < out[j].SessionID })
	return out
}
