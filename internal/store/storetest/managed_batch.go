package storetest

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ExerciseManagedBatch runs the contract of ManagedStore.AppendEventsBatch
// (group commit of many sessions' events). newStore must return a fresh,
// empty store for each call and arrange its Close with t.Cleanup.
func ExerciseManagedBatch(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.Store) {
	t.Helper()
	for _, c := range mgBatchCases {
		t.Run(c.name, func(t *testing.T) {
			c.fn(&mgEnv{ctx: ctx, t: t, s: newStore(t)})
		})
	}
}

var mgBatchCases = []mgCase{
	{"DenseSeqPerSession", testMgBatchDense},
	{"EmptyBatchAndEmptySession", testMgBatchEmpty},
	{"UnknownSessionStoresNothing", testMgBatchUnknownSession},
	{"DuplicateIDStoresNothing", testMgBatchDuplicate},
	{"InvalidStoresNothing", testMgBatchInvalid},
	{"ManySessions", testMgBatchMany},
	{"RaceWithSingleAppends", testMgBatchRace},
}

// mgNewEvents makes n events tagged with who wrote them.
func mgNewEvents(tag string, n int) []store.NewEvent {
	evs := make([]store.NewEvent, n)
	for i := range evs {
		evs[i] = store.NewEvent{Type: "agent.message", Data: json.RawMessage(fmt.Sprintf(`{"tag":%q,"i":%d}`, tag, i))}
	}
	return evs
}

// mgBatch appends batch and fails the test on error.
func (e *mgEnv) batch(batch map[string][]store.NewEvent) map[string][]store.SessionEvent {
	e.t.Helper()
	out, err := e.s.AppendEventsBatch(e.ctx, batch)
	mustOK(e.t, err, "AppendEventsBatch")
	return out
}

// mgSameEvents checks that the stored events from Seq first on are want.
func (e *mgEnv) sameStored(sessionID string, afterSeq int64, want []store.SessionEvent) {
	e.t.Helper()
	stored := e.events(store.ListEventsParams{SessionID: sessionID, AfterSeq: afterSeq})
	equal(e.t, sessionID+": stored events", len(stored), len(want))
	for i, got := range stored {
		what := fmt.Sprintf("%s: stored event %d", sessionID, i)
		equal(e.t, what+" SessionID", got.SessionID, sessionID)
		equal(e.t, what+" Seq", got.Seq, want[i].Seq)
		equal(e.t, what+" ID", got.ID, want[i].ID)
		equal(e.t, what+" Type", got.Type, want[i].Type)
		jsonEq(e.t, what+" Data", got.Data, string(want[i].Data))
		sbSameTime(e.t, what+" CreatedAt", got.CreatedAt, want[i].CreatedAt)
		mgUTC(e.t, what+" CreatedAt", got.CreatedAt)
	}
}

// testMgBatchDense: each session's events continue its own Seq, in the
// order given, with ids generated or kept, as AppendEvents would.
func testMgBatchDense(e *mgEnv) {
	a := e.session(store.ManagedSession{ID: "sesn_a"})
	b := e.session(store.ManagedSession{ID: "sesn_b"})
	c := e.session(store.ManagedSession{ID: "sesn_c"})
	e.appendTypes(a.ID, "user.message", "session.status_running")
	e.appendTypes(c.ID, "user.message")

	given := mgNewEvents("a", 3)
	given[0].ID = "sevt_same" // an id may repeat across sessions
	bEvs := mgNewEvents("b", 1)
	bEvs[0].ID = "sevt_same"
	out := e.batch(map[string][]store.NewEvent{a.ID: given, b.ID: bEvs, c.ID: mgNewEvents("c", 2)})
	equal(e.t, "sessions in the result", len(out), 3)
	mgEqualSeqs(e.t, "sesn_a", out[a.ID], 3, 4, 5)
	mgEqualSeqs(e.t, "sesn_b", out[b.ID], 1)
	mgEqualSeqs(e.t, "sesn_c", out[c.ID], 2, 3)
	equal(e.t, "given id kept", out[a.ID][0].ID, "sevt_same")
	equal(e.t, "given id kept in another session", out[b.ID][0].ID, "sevt_same")
	mgHasPrefix(e.t, "AppendEventsBatch", out[a.ID][1].ID, "sevt")
	for id, evs := range out {
		for i, ev := range evs {
			equal(e.t, fmt.Sprintf("%s event %d SessionID", id, i), ev.SessionID, id)
			jsonEq(e.t, fmt.Sprintf("%s event %d Data", id, i), ev.Data,
				fmt.Sprintf(`{"tag":%q,"i":%d}`, id[len("sesn_"):], i))
		}
	}
	e.sameStored(a.ID, 2, out[a.ID])
	e.sameStored(b.ID, 0, out[b.ID])
	e.sameStored(c.ID, 1, out[c.ID])
	equal(e.t, "LastEventSeq sesn_a", e.lastSeq(a.ID), int64(5))
	equal(e.t, "LastEventSeq sesn_b", e.lastSeq(b.ID), int64(1))
	equal(e.t, "LastEventSeq sesn_c", e.lastSeq(c.ID), int64(3))

	// A later single append continues where the batch left off.
	mgEqualSeqs(e.t, "append after the batch", e.appendTypes(a.ID, "agent.message"), 6)
}

func testMgBatchEmpty(e *mgEnv) {
	out, err := e.s.AppendEventsBatch(e.ctx, nil)
	mustOK(e.t, err, "AppendEventsBatch(nil)")
	equal(e.t, "sessions in an empty result", len(out), 0)

	a := e.session(store.ManagedSession{ID: "sesn_a"})
	b := e.session(store.ManagedSession{ID: "sesn_b"})
	out = e.batch(map[string][]store.NewEvent{a.ID: nil, b.ID: mgNewEvents("b", 1)})
	equal(e.t, "sessions in the result", len(out), 2)
	if evs, ok := out[a.ID]; !ok || len(evs) != 0 {
		e.t.Fatalf("session with no events: got %v (present %v), want an empty entry", evs, ok)
	}
	mgEqualSeqs(e.t, "sesn_b", out[b.ID], 1)
	equal(e.t, "LastEventSeq of the empty session", e.lastSeq(a.ID), int64(0))
}

// testMgBatchUnknownSession: one unknown session fails the whole batch,
// even when it has no events of its own.
func testMgBatchUnknownSession(e *mgEnv) {
	a := e.session(store.ManagedSession{ID: "sesn_a"})
	b := e.session(store.ManagedSession{ID: "sesn_b"})
	e.appendTypes(a.ID, "user.message")
	for _, missing := range [][]store.NewEvent{mgNewEvents("x", 1), nil} {
		// "sesn_0" sorts before the known sessions and "sesn_z" after, so
		// the failure comes both before and after writes of the batch.
		for _, id := range []string{"sesn_0", "sesn_z"} {
			_, err := e.s.AppendEventsBatch(e.ctx, map[string][]store.NewEvent{
				a.ID: mgNewEvents("a", 2), b.ID: mgNewEvents("b", 1), id: missing})
			mustErrIs(e.t, err, store.ErrNotFound, fmt.Sprintf("AppendEventsBatch with unknown %s (%d events)", id, len(missing)))
		}
	}
	equal(e.t, "LastEventSeq sesn_a", e.lastSeq(a.ID), int64(1))
	equal(e.t, "LastEventSeq sesn_b", e.lastSeq(b.ID), int64(0))
	equal(e.t, "events of sesn_a", len(e.events(store.ListEventsParams{SessionID: a.ID})), 1)
	equal(e.t, "events of sesn_b", len(e.events(store.ListEventsParams{SessionID: b.ID})), 0)
}

// testMgBatchDuplicate: an id already stored in a session, or given twice
// for one session, fails the whole batch with ErrAlreadyExists.
func testMgBatchDuplicate(e *mgEnv) {
	a := e.session(store.ManagedSession{ID: "sesn_a"})
	z := e.session(store.ManagedSession{ID: "sesn_z"})
	stored, err := e.s.AppendEvents(e.ctx, z.ID, []store.NewEvent{{ID: "sevt_taken", Type: "user.message"}})
	mustOK(e.t, err, "AppendEvents")

	again := mgNewEvents("z", 2)
	again[1].ID = "sevt_taken"
	_, err = e.s.AppendEventsBatch(e.ctx, map[string][]store.NewEvent{a.ID: mgNewEvents("a", 2), z.ID: again})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "AppendEventsBatch repeating a stored id")

	twice := []store.NewEvent{{ID: "sevt_twice", Type: "x"}, {ID: "sevt_twice", Type: "y"}}
	_, err = e.s.AppendEventsBatch(e.ctx, map[string][]store.NewEvent{a.ID: twice, z.ID: mgNewEvents("z", 1)})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "AppendEventsBatch naming one id twice in a session")

	equal(e.t, "LastEventSeq sesn_a", e.lastSeq(a.ID), int64(0))
	equal(e.t, "LastEventSeq sesn_z", e.lastSeq(z.ID), int64(1))
	e.sameStored(z.ID, 0, stored)
}

func testMgBatchInvalid(e *mgEnv) {
	a := e.session(store.ManagedSession{ID: "sesn_a"})
	b := e.session(store.ManagedSession{ID: "sesn_b"})
	for what, bad := range map[string]store.NewEvent{
		"empty Type":      {Type: ""},
		"non-JSON Data":   {Type: "agent.message", Data: json.RawMessage(`{not json`)},
		"non-object Data": {Type: "agent.message", Data: json.RawMessage(`[1]`)},
	} {
		_, err := e.s.AppendEventsBatch(e.ctx, map[string][]store.NewEvent{
			a.ID: mgNewEvents("a", 1), b.ID: append(mgNewEvents("b", 1), bad)})
		mustErrIs(e.t, err, store.ErrInvalid, "AppendEventsBatch with "+what)
	}
	equal(e.t, "LastEventSeq sesn_a", e.lastSeq(a.ID), int64(0))
	equal(e.t, "LastEventSeq sesn_b", e.lastSeq(b.ID), int64(0))
}

// testMgBatchMany: a batch far larger than any engine's statement size
// (150 sessions, 0 to 4 events each, some with earlier events).
func testMgBatchMany(e *mgEnv) {
	const n = 150
	batch := map[string][]store.NewEvent{}
	for i := range n {
		id := e.session(store.ManagedSession{ID: fmt.Sprintf("sesn_%03d", i)}).ID
		if i%7 == 0 {
			e.appendTypes(id, "user.message")
		}
		batch[id] = mgNewEvents(fmt.Sprint(i), i%5)
	}
	out := e.batch(batch)
	equal(e.t, "sessions in the result", len(out), n)
	for i := range n {
		id := fmt.Sprintf("sesn_%03d", i)
		before := int64(0)
		if i%7 == 0 {
			before = 1
		}
		want := []int64{}
		for j := range i % 5 {
			want = append(want, before+1+int64(j))
		}
		mgEqualSeqs(e.t, id, out[id], want...)
		e.sameStored(id, before, out[id])
		equal(e.t, id+": LastEventSeq", e.lastSeq(id), before+int64(i%5))
	}
}

// testMgBatchRace: batches over overlapping sessions (in every order) race
// single appends; every session's Seq is 1..N with no gap or repeat and
// each append's events are contiguous.
func testMgBatchRace(e *mgEnv) {
	const sessions, writers = 4, 24
	ids := make([]string, sessions)
	for i := range ids {
		ids[i] = e.session(store.ManagedSession{ID: fmt.Sprintf("sesn_%d", i)}).ID
	}
	results := make([]map[string][]store.SessionEvent, writers)
	errs := make([]error, writers)
	want := map[string]int{}
	plan := make([]map[string][]store.NewEvent, writers)
	for w := range writers {
		plan[w] = map[string][]store.NewEvent{}
		if w%3 == 0 { // a single append
			id := ids[w%sessions]
			plan[w][id] = mgNewEvents(fmt.Sprintf("w%d", w), 2)
			want[id] += 2
			continue
		}
		for k := range 2 + w%3 { // a batch of 2 or 3 sessions
			id := ids[(w+k)%sessions]
			plan[w][id] = mgNewEvents(fmt.Sprintf("w%d", w), 1+k)
			want[id] += 1 + k
		}
	}
	race(writers, func(w int) {
		if w%3 == 0 {
			for id, evs := range plan[w] {
				var got []store.SessionEvent
				got, errs[w] = e.s.AppendEvents(e.ctx, id, evs)
				results[w] = map[string][]store.SessionEvent{id: got}
			}
			return
		}
		results[w], errs[w] = e.s.AppendEventsBatch(e.ctx, plan[w])
	})
	owner := map[string]map[int64]string{}
	for w := range writers {
		mustOK(e.t, errs[w], fmt.Sprintf("writer %d", w))
		for id, evs := range results[w] {
			equal(e.t, fmt.Sprintf("writer %d: events in %s", w, id), len(evs), len(plan[w][id]))
			if owner[id] == nil {
				owner[id] = map[int64]string{}
			}
			for j, ev := range evs {
				if ev.Seq != evs[0].Seq+int64(j) {
					e.t.Fatalf("writer %d: %s not contiguous: seqs %v", w, id, mgSeqs(evs))
				}
				if prev, dup := owner[id][ev.Seq]; dup {
					e.t.Fatalf("%s: Seq %d given to %s and %s", id, ev.Seq, prev, ev.ID)
				}
				owner[id][ev.Seq] = ev.ID
			}
		}
	}
	for _, id := range ids {
		stored := e.events(store.ListEventsParams{SessionID: id})
		equal(e.t, id+": stored events", len(stored), want[id])
		for i, ev := range stored {
			equal(e.t, id+": stored Seq", ev.Seq, int64(i+1))
			equal(e.t, fmt.Sprintf("%s: event at Seq %d", id, ev.Seq), ev.ID, owner[id][ev.Seq])
		}
		equal(e.t, id+": LastEventSeq", e.lastSeq(id), int64(want[id]))
	}
}
