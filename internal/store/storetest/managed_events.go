package storetest

import (
	"encoding/json"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

var mgEventCases = []mgCase{
	{"AppendDenseSeq", testMgEventsDense},
	{"UnknownSession", testMgEventsUnknownSession},
	{"ListFilters", testMgEventsList},
	{"GetScopedToSession", testMgEventsGet},
	{"DuplicateIDAppendsNothing", testMgEventsDuplicate},
	{"InvalidAppendsNothing", testMgEventsInvalid},
}

func testMgEventsDense(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_ev"})
	equal(e.t, "LastEventSeq with no events", e.lastSeq(s.ID), int64(0))
	mgEqualSeqs(e.t, "ListEvents with no events", e.events(store.ListEventsParams{SessionID: s.ID}))
	data := `{"type":"user.message","content":[{"type":"text","text":"hi"}]}`
	first, err := e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{
		{ID: "sevt_given", Type: "user.message", Data: json.RawMessage(data)},
		{Type: "session.status_running"},
		{Type: "agent.message", Data: json.RawMessage(`{"type":"agent.message"}`)},
	})
	mustOK(e.t, err, "AppendEvents")
	mgEqualSeqs(e.t, "first batch", first, 1, 2, 3)
	equal(e.t, "given id", first[0].ID, "sevt_given")
	mgHasPrefix(e.t, "AppendEvents", first[1].ID, "sevt")
	if !(first[1].ID < first[2].ID) {
		e.t.Fatalf("generated event ids %q then %q are not time-ordered", first[1].ID, first[2].ID)
	}
	second := e.appendTypes(s.ID, "agent.tool_use", "session.status_idle")
	mgEqualSeqs(e.t, "second batch", second, 4, 5)
	equal(e.t, "LastEventSeq", e.lastSeq(s.ID), int64(5))

	stored := e.events(store.ListEventsParams{SessionID: s.ID})
	all := append(append([]store.SessionEvent{}, first...), second...)
	equal(e.t, "stored events", len(stored), len(all))
	for i, got := range stored {
		want := all[i]
		what := fmt.Sprintf("stored event %d", i)
		equal(e.t, what+" SessionID", got.SessionID, s.ID)
		equal(e.t, what+" Seq", got.Seq, want.Seq)
		equal(e.t, what+" ID", got.ID, want.ID)
		equal(e.t, what+" Type", got.Type, want.Type)
		jsonEq(e.t, what+" Data", got.Data, string(want.Data))
		sbSameTime(e.t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
		mgUTC(e.t, what+" CreatedAt", got.CreatedAt)
		if got.CreatedAt.IsZero() {
			e.t.Fatalf("%s: CreatedAt is zero", what)
		}
	}
	jsonEq(e.t, "Data of the given event", stored[0].Data, data)
	jsonEq(e.t, "empty Data", stored[1].Data, `{}`)

	none, err := e.s.AppendEvents(e.ctx, s.ID, nil)
	mustOK(e.t, err, "AppendEvents of no events")
	equal(e.t, "events returned for an empty batch", len(none), 0)
	equal(e.t, "LastEventSeq after an empty batch", e.lastSeq(s.ID), int64(5))
}

func testMgEventsUnknownSession(e *mgEnv) {
	_, err := e.s.AppendEvents(e.ctx, "sesn_missing", []store.NewEvent{{Type: "user.message"}})
	mustErrIs(e.t, err, store.ErrNotFound, "AppendEvents to an unknown session")
	_, err = e.s.AppendEvents(e.ctx, "sesn_missing", nil)
	mustErrIs(e.t, err, store.ErrNotFound, "AppendEvents of no events to an unknown session")
	_, err = e.s.ListEvents(e.ctx, store.ListEventsParams{SessionID: "sesn_missing"})
	mustErrIs(e.t, err, store.ErrNotFound, "ListEvents of an unknown session")
	_, err = e.s.LastEventSeq(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "LastEventSeq of an unknown session")
	_, err = e.s.GetEvent(e.ctx, "sesn_missing", "sevt_x")
	mustErrIs(e.t, err, store.ErrNotFound, "GetEvent of an unknown session")
}

func testMgEventsList(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_list"})
	e.appendTypes(s.ID, "user.message", "agent.message", "agent.tool_use", "agent.tool_result", "agent.message",
		"session.status_idle", "user.message", "agent.message")
	list := func(p store.ListEventsParams) []store.SessionEvent {
		p.SessionID = s.ID
		return e.events(p)
	}
	mgEqualSeqs(e.t, "all", list(store.ListEventsParams{}), 1, 2, 3, 4, 5, 6, 7, 8)
	mgEqualSeqs(e.t, "AfterSeq", list(store.ListEventsParams{AfterSeq: 5}), 6, 7, 8)
	mgEqualSeqs(e.t, "BeforeSeq", list(store.ListEventsParams{BeforeSeq: 3}), 1, 2)
	mgEqualSeqs(e.t, "window", list(store.ListEventsParams{AfterSeq: 2, BeforeSeq: 6}), 3, 4, 5)
	mgEqualSeqs(e.t, "Limit", list(store.ListEventsParams{AfterSeq: 2, Limit: 2}), 3, 4)
	mgEqualSeqs(e.t, "BeforeSeq Limit (ascending)", list(store.ListEventsParams{BeforeSeq: 6, Limit: 2}), 1, 2)
	mgEqualSeqs(e.t, "one type", list(store.ListEventsParams{Types: []string{"agent.message"}}), 2, 5, 8)
	mgEqualSeqs(e.t, "two types", list(store.ListEventsParams{Types: []string{"user.message", "session.status_idle"}}), 1, 6, 7)
	mgEqualSeqs(e.t, "types window limit", list(store.ListEventsParams{Types: []string{"agent.message", "user.message"},
		AfterSeq: 1, BeforeSeq: 8, Limit: 2}), 2, 5)
	mgEqualSeqs(e.t, "unknown type", list(store.ListEventsParams{Types: []string{"span.model_request_start"}}))
	mgEqualSeqs(e.t, "past the end", list(store.ListEventsParams{AfterSeq: 8}))
	for _, ev := range list(store.ListEventsParams{Types: []string{"agent.tool_use"}}) {
		equal(e.t, "filtered Type", ev.Type, "agent.tool_use")
		jsonEq(e.t, "filtered Data", ev.Data, `{"type":"agent.tool_use","n":2}`)
	}
}

func testMgEventsGet(e *mgEnv) {
	a := e.session(store.ManagedSession{ID: "sesn_a"})
	b := e.session(store.ManagedSession{ID: "sesn_b"})
	evs := e.appendTypes(a.ID, "user.message", "agent.message")
	got, err := e.s.GetEvent(e.ctx, a.ID, evs[1].ID)
	mustOK(e.t, err, "GetEvent")
	equal(e.t, "Seq", got.Seq, int64(2))
	equal(e.t, "Type", got.Type, "agent.message")
	equal(e.t, "SessionID", got.SessionID, a.ID)
	jsonEq(e.t, "Data", got.Data, string(evs[1].Data))
	sbSameTime(e.t, "CreatedAt", got.CreatedAt, evs[1].CreatedAt)
	_, err = e.s.GetEvent(e.ctx, b.ID, evs[1].ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetEvent through another session")
	_, err = e.s.GetEvent(e.ctx, a.ID, "sevt_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetEvent of an unknown id")
}

func testMgEventsDuplicate(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_dup"})
	other := e.session(store.ManagedSession{ID: "sesn_other"})
	_, err := e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{{ID: "sevt_1", Type: "user.message"}})
	mustOK(e.t, err, "AppendEvents")
	_, err = e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{{Type: "agent.message"}, {ID: "sevt_1", Type: "agent.message"}})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "AppendEvents repeating a stored id")
	_, err = e.s.AppendEvents(e.ctx, s.ID, []store.NewEvent{{ID: "sevt_2", Type: "a"}, {ID: "sevt_2", Type: "b"}})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "AppendEvents naming one id twice")
	equal(e.t, "LastEventSeq after refused batches", e.lastSeq(s.ID), int64(1))
	mgEqualSeqs(e.t, "events after refused batches", e.events(store.ListEventsParams{SessionID: s.ID}), 1)
	// The refused batches used no Seq: the next one continues densely.
	mgEqualSeqs(e.t, "next batch", e.appendTypes(s.ID, "agent.message"), 2)
	// Ids are unique per session; lookups are scoped by session.
	_, err = e.s.AppendEvents(e.ctx, other.ID, []store.NewEvent{{ID: "sevt_1", Type: "user.message"}})
	mustOK(e.t, err, "AppendEvents of the same id to another session")
}

func testMgEventsInvalid(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_bad"})
	for what, evs := range map[string][]store.NewEvent{
		"empty Type":       {{Type: "user.message"}, {Type: ""}},
		"malformed Data":   {{Type: "user.message", Data: json.RawMessage(`{"a":`)}},
		"non-object Data":  {{Type: "user.message", Data: json.RawMessage(`[1,2]`)}},
		"second is broken": {{Type: "user.message"}, {Type: "user.message", Data: json.RawMessage(`x`)}},
	} {
		_, err := e.s.AppendEvents(e.ctx, s.ID, evs)
		mustErrIs(e.t, err, store.ErrInvalid, "AppendEvents with "+what)
	}
	equal(e.t, "LastEventSeq after refused batches", e.lastSeq(s.ID), int64(0))
}
