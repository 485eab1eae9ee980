package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var mgRaceCases = []mgCase{
	{"AgentUpdateOneWinnerPerVersion", testMgAgentUpdateRace},
	{"AgentArchiveCoversRacingUpdate", testMgAgentArchiveRace},
	{"SessionUpdateOneWinnerPerVersion", testMgSessionUpdateRace},
	{"AppendDenseUnderConcurrency", testMgAppendRace},
	{"AppendAndUpdate", testMgAppendUpdateRace},
	{"RunRowInsertExactlyOneWins", testMgRunRowInsertRace},
	{"RunRowTakeoverExactlyOneWins", testMgRunRowTakeoverRace},
	{"RunRowBatchClaimExactlyOneOwner", testMgRunRowClaimRace},
}

// mgOneWinner checks that exactly one of errs is nil and the rest are want.
func mgOneWinner(e *mgEnv, what string, errs []error, want error) int {
	e.t.Helper()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				e.t.Fatalf("%s: racers %d and %d both won", what, winner, i)
			}
			winner = i
		case !errors.Is(err, want):
			e.t.Fatalf("%s: racer %d: got %v, want nil or %v", what, i, err, want)
		}
	}
	if winner < 0 {
		e.t.Fatalf("%s: nobody won", what)
	}
	return winner
}

func testMgAgentUpdateRace(e *mgEnv) {
	const n = 20
	a := e.agent(store.Agent{ID: "agent_race", Doc: json.RawMessage(`{"name":"v1"}`)})
	errs := make([]error, n)
	race(n, func(i int) {
		_, errs[i] = e.s.UpdateAgent(e.ctx, a.ID, 1, json.RawMessage(fmt.Sprintf(`{"name":"writer-%d"}`, i)))
	})
	winner := mgOneWinner(e, "UpdateAgent from version 1", errs, store.ErrVersionMismatch)
	versions, err := e.s.ListAgentVersions(e.ctx, a.ID)
	mustOK(e.t, err, "ListAgentVersions")
	equal(e.t, "versions", len(versions), 2)
	got := e.getAgent(a.ID, 0)
	equal(e.t, "latest Version", got.Version, int64(2))
	jsonEq(e.t, "latest Doc", got.Doc, fmt.Sprintf(`{"name":"writer-%d"}`, winner))
	list, err := e.s.ListAgents(e.ctx, store.ListResourcesParams{TenantID: mgTenant})
	mgEqualIDs(e.t, "ListAgents lists one latest row", mgIDs(e.t, "ListAgents", list, err, agentID), a.ID)
}

// testMgAgentArchiveRace: an update racing an archive either lands first
// (and its new version is archived too) or is refused; the latest version
// is archived either way.
func testMgAgentArchiveRace(e *mgEnv) {
	const rounds = 10
	for r := range rounds {
		id := fmt.Sprintf("agent_ar_%02d", r)
		e.agent(store.Agent{ID: id})
		errs := make([]error, 2)
		race(2, func(i int) {
			if i == 0 {
				_, errs[0] = e.s.UpdateAgent(e.ctx, id, 1, json.RawMessage(`{"name":"v2"}`))
				return
			}
			_, errs[1] = e.s.ArchiveAgent(e.ctx, id, sbAt(0))
		})
		if errs[0] != nil && !errors.Is(errs[0], store.ErrConflict) {
			e.t.Fatalf("round %d: UpdateAgent: got %v, want nil or ErrConflict", r, errs[0])
		}
		mustOK(e.t, errs[1], fmt.Sprintf("round %d: ArchiveAgent", r))
		latest := e.getAgent(id, 0)
		if latest.ArchivedAt == nil {
			e.t.Fatalf("round %d: latest version %d is not archived (update err %v)", r, latest.Version, errs[0])
		}
		wantVersion := int64(2)
		if errs[0] != nil {
			wantVersion = 1
		}
		equal(e.t, fmt.Sprintf("round %d: latest Version", r), latest.Version, wantVersion)
	}
}

func testMgSessionUpdateRace(e *mgEnv) {
	const n = 20
	s := e.session(store.ManagedSession{ID: "sesn_cas"})
	errs := make([]error, n)
	race(n, func(i int) {
		next := *s
		next.ProcessedSeq = int64(i + 1)
		next.SandboxID = fmt.Sprintf("sbx_%d", i)
		_, errs[i] = e.s.UpdateManagedSession(e.ctx, &next)
	})
	winner := mgOneWinner(e, "UpdateManagedSession from version 1", errs, store.ErrVersionMismatch)
	got := e.getSession(s.ID)
	equal(e.t, "Version", got.Version, int64(2))
	// The stored row is the winner's alone, never a mix of two writers.
	equal(e.t, "ProcessedSeq", got.ProcessedSeq, int64(winner+1))
	equal(e.t, "SandboxID", got.SandboxID, fmt.Sprintf("sbx_%d", winner))
}

// testMgAppendRace: 50 appenders with batches of 1 to 3 events; Seq is
// 1..N with no gap or repeat, every batch is contiguous and stored where
// its Seqs say.
func testMgAppendRace(e *mgEnv) {
	const n = 50
	s := e.session(store.ManagedSession{ID: "sesn_append"})
	got := make([][]store.SessionEvent, n)
	errs := make([]error, n)
	total := 0
	for i := range n {
		total += i%3 + 1
	}
	race(n, func(i int) {
		evs := make([]store.NewEvent, i%3+1)
		for j := range evs {
			evs[j] = store.NewEvent{ID: fmt.Sprintf("sevt_%02d_%d", i, j), Type: "agent.message",
				Data: json.RawMessage(fmt.Sprintf(`{"writer":%d,"index":%d}`, i, j))}
		}
		got[i], errs[i] = e.s.AppendEvents(e.ctx, s.ID, evs)
	})
	owner := map[int64]string{}
	for i := range n {
		mustOK(e.t, errs[i], fmt.Sprintf("appender %d", i))
		equal(e.t, fmt.Sprintf("appender %d events", i), len(got[i]), i%3+1)
		for j, ev := range got[i] {
			if ev.Seq != got[i][0].Seq+int64(j) {
				e.t.Fatalf("appender %d: batch not contiguous: seqs %v", i, mgSeqs(got[i]))
			}
			if prev, dup := owner[ev.Seq]; dup {
				e.t.Fatalf("Seq %d given to %s and %s", ev.Seq, prev, ev.ID)
			}
			owner[ev.Seq] = ev.ID
		}
	}
	stored := e.events(store.ListEventsParams{SessionID: s.ID})
	equal(e.t, "stored events", len(stored), total)
	for i, ev := range stored {
		equal(e.t, "stored Seq", ev.Seq, int64(i+1))
		equal(e.t, fmt.Sprintf("event at Seq %d", ev.Seq), ev.ID, owner[ev.Seq])
	}
	equal(e.t, "LastEventSeq", e.lastSeq(s.ID), int64(total))
}

// testMgAppendUpdateRace: a writer's CAS loop on its session (re-read on
// a mismatch, as the runtime's and the API's do) while others append: every
// update and every append lands once, and the version counts them all.
func testMgAppendUpdateRace(e *mgEnv) {
	const appenders, appends, updates = 4, 15, 15
	const id = "sesn_mix"
	e.session(store.ManagedSession{ID: id})
	errs := make([]error, appenders+1)
	race(appenders+1, func(i int) {
		if i < appenders {
			for j := range appends {
				if _, err := e.s.AppendEvents(e.ctx, id, []store.NewEvent{{Type: "agent.message"}}); err != nil {
					errs[i] = fmt.Errorf("append %d: %w", j, err)
					return
				}
			}
			return
		}
		for j := 0; j < updates; {
			cur, err := e.s.GetManagedSession(e.ctx, id)
			if err != nil {
				errs[i] = err
				return
			}
			next := *cur
			next.ProcessedSeq++
			_, err = e.s.UpdateManagedSession(e.ctx, &next)
			if errors.Is(err, store.ErrVersionMismatch) {
				continue
			}
			if err != nil {
				errs[i] = fmt.Errorf("update %d from version %d: %w", j, next.Version, err)
				return
			}
			j++
		}
	})
	for i, err := range errs {
		mustOK(e.t, err, fmt.Sprintf("goroutine %d", i))
	}
	got := e.getSession(id)
	equal(e.t, "Version", got.Version, int64(1+updates+appenders*appends))
	equal(e.t, "ProcessedSeq", got.ProcessedSeq, int64(updates))
	equal(e.t, "LastEventSeq", e.lastSeq(id), int64(appenders*appends))
}

func testMgRunRowInsertRace(e *mgEnv) {
	const n = 50
	s := e.session(store.ManagedSession{ID: "sesn_turn"})
	errs := make([]error, n)
	race(n, func(i int) {
		_, errs[i] = e.s.InsertRunRow(e.ctx, &store.RunRow{SessionID: s.ID, TurnSeq: int64(i + 1),
			Owner: fmt.Sprintf("node-%d/boot", i), LeaseExpiresAt: sbAt(time.Minute)})
	})
	winner := mgOneWinner(e, "InsertRunRow", errs, store.ErrAlreadyExists)
	got, err := e.s.GetRunRow(e.ctx, s.ID)
	mustOK(e.t, err, "GetRunRow")
	equal(e.t, "Owner", got.Owner, fmt.Sprintf("node-%d/boot", winner))
	equal(e.t, "TurnSeq", got.TurnSeq, int64(winner+1))
}

// testMgRunRowTakeoverRace: recoverers on several nodes find the same
// orphan and race to take it over from the dead owner; one gets it.
func testMgRunRowTakeoverRace(e *mgEnv) {
	const n = 20
	s := e.session(store.ManagedSession{ID: "sesn_orphan"})
	row := e.runRow(store.RunRow{SessionID: s.ID, TurnSeq: 1, Owner: "node-dead/boot", LeaseExpiresAt: sbAt(0)})
	errs := make([]error, n)
	race(n, func(i int) {
		next := *row
		next.Owner, next.Recovering, next.RecoveryAttempts = fmt.Sprintf("node-%d/boot", i), true, int64(i+1)
		_, errs[i] = e.s.UpdateRunRow(e.ctx, &next, "node-dead/boot")
	})
	winner := mgOneWinner(e, "UpdateRunRow takeover", errs, store.ErrConflict)
	got, err := e.s.GetRunRow(e.ctx, s.ID)
	mustOK(e.t, err, "GetRunRow")
	equal(e.t, "Owner", got.Owner, fmt.Sprintf("node-%d/boot", winner))
	equal(e.t, "RecoveryAttempts", got.RecoveryAttempts, int64(winner+1))
	equal(e.t, "Recovering", got.Recovering, true)
}

// testMgRunRowClaimRace: recoverers on several nodes claim overlapping
// batches of one dead owner's rows at once (each its own order, and
// racing single-row takeovers too); every row ends with exactly one of
// them, the one whose claim returned it.
func testMgRunRowClaimRace(e *mgEnv) {
	const rows, batchers, singles = 40, 6, 4
	dead := "node-dead/boot"
	var ids []string
	for i := range rows {
		s := e.session(store.ManagedSession{ID: fmt.Sprintf("sesn_claim%02d", i)})
		e.runRow(store.RunRow{SessionID: s.ID, TurnSeq: 1, Owner: dead, LeaseExpiresAt: sbAt(0)})
		ids = append(ids, s.ID)
	}
	won := make([][]string, batchers+singles)
	errs := make([]error, batchers+singles)
	race(batchers+singles, func(i int) {
		owner := fmt.Sprintf("node-%d/boot", i)
		if i >= batchers {
			// A single-row takeover of every third row, as UpdateRunRow.
			for j := i % 3; j < rows; j += 3 {
				_, err := e.s.UpdateRunRow(e.ctx, &store.RunRow{SessionID: ids[j], Owner: owner, Recovering: true,
					LeaseExpiresAt: sbAt(time.Minute)}, dead)
				switch {
				case err == nil:
					won[i] = append(won[i], ids[j])
				case !errors.Is(err, store.ErrConflict):
					errs[i] = err
				}
			}
			return
		}
		// Overlapping batches, each in its own order.
		batch := make([]string, 0, rows)
		for j := range rows {
			batch = append(batch, ids[(j*(i+1)+i)%rows])
		}
		got, err := e.s.ClaimRunRows(e.ctx, store.RunRowClaim{From: dead, Owner: owner, Lease: sbAt(time.Minute),
			SessionIDs: batch})
		errs[i] = err
		for _, r := range got {
			if r.Owner != owner {
				errs[i] = fmt.Errorf("claim returned %s with owner %q", r.SessionID, r.Owner)
			}
			won[i] = append(won[i], r.SessionID)
		}
	})
	owners := map[string]string{}
	for i, err := range errs {
		mustOK(e.t, err, fmt.Sprintf("claimer %d", i))
		for _, id := range won[i] {
			if prev, dup := owners[id]; dup {
				e.t.Fatalf("run row of %s claimed by both %s and node-%d/boot", id, prev, i)
			}
			owners[id] = fmt.Sprintf("node-%d/boot", i)
		}
	}
	for _, id := range ids {
		got, err := e.s.GetRunRow(e.ctx, id)
		mustOK(e.t, err, "GetRunRow "+id)
		if owners[id] == "" {
			e.t.Fatalf("run row of %s claimed by nobody (owner %q)", id, got.Owner)
		}
		equal(e.t, id+" Owner", got.Owner, owners[id])
	}
}
