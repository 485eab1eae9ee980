package storetest

import (
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var mgRunRowCases = []mgCase{
	{"InsertGetRoundTrip", testMgRunRowRoundTrip},
	{"InsertRefusals", testMgRunRowInsertRefusals},
	{"UpdateOnlyByOwner", testMgRunRowUpdate},
	{"DeleteOnlyByOwner", testMgRunRowDelete},
	{"ListAll", testMgRunRowList},
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
