package storetest

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var objAlarmCases = []objCase{
	{"SetGetRoundTrip", testAlarmRoundTrip},
	{"SetReplacesPending", testAlarmReplace},
	{"FiredIsNotReplaced", testAlarmFiredKept},
	{"SetRaceLeavesOnePending", testAlarmRace},
	{"DueOrderLimitAndFired", testAlarmDue},
	{"AttemptsAndFired", testAlarmAttempts},
	{"ListAndDelete", testAlarmListDelete},
}

func (e *objEnv) setAlarm(a store.Alarm) *store.Alarm {
	e.t.Helper()
	out, err := e.s.SetAlarm(e.ctx, &a)
	if err != nil {
		e.t.Fatalf("SetAlarm(%s %s): %v", a.ObjectKey.ID, a.Method, err)
	}
	return out
}

func (e *objEnv) alarms(k store.ObjectKey) []*store.Alarm {
	e.t.Helper()
	as, err := e.s.ListAlarms(e.ctx, k)
	mustOK(e.t, err, "ListAlarms")
	return as
}

func (e *objEnv) pending(k store.ObjectKey) int64 {
	e.t.Helper()
	n, err := e.s.CountPendingAlarms(e.ctx, k)
	mustOK(e.t, err, "CountPendingAlarms")
	return n
}

func sameAlarm(t *testing.T, what string, got, want *store.Alarm) {
	t.Helper()
	equal(t, what+" ID", got.ID, want.ID)
	equal(t, what+" object", got.ObjectKey, want.ObjectKey)
	equal(t, what+" Method", got.Method, want.Method)
	if len(want.Args) == 0 {
		if len(got.Args) != 0 {
			t.Fatalf("%s Args: got %s, want none", what, got.Args)
		}
	} else {
		jsonEq(t, what+" Args", got.Args, string(want.Args))
	}
	objSameTime(t, what+" FireAt", got.FireAt, want.FireAt)
	equal(t, what+" Fired", got.Fired, want.Fired)
	equal(t, what+" Attempts", got.Attempts, want.Attempts)
	equal(t, what+" LastError", got.LastError, want.LastError)
	objSameTime(t, what+" CreatedAt", got.CreatedAt, want.CreatedAt)
	objSameTime(t, what+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
}

func alarmIDs(as []*store.Alarm) []string {
	out := []string{}
	for _, a := range as {
		out = append(out, a.ID)
	}
	return out
}

func testAlarmRoundTrip(e *objEnv) {
	k := objKey("tnt_a", "counter", "al")
	e.create(k)
	// Fired, Attempts and LastError from the caller are ignored: a new
	// alarm is pending.
	a := e.setAlarm(store.Alarm{ObjectKey: k, Method: "reset", Args: json.RawMessage(`{"amount": 5}`),
		FireAt: objAt(time.Hour), Fired: true, Attempts: 3, LastError: "old"})
	if !strings.HasPrefix(a.ID, "alm_") {
		e.t.Fatalf("generated alarm id %q: want an alm_ id", a.ID)
	}
	want := &store.Alarm{ID: a.ID, ObjectKey: k, Method: "reset", Args: json.RawMessage(`{"amount": 5}`),
		FireAt: objAt(time.Hour), CreatedAt: a.CreatedAt, UpdatedAt: a.CreatedAt}
	sameAlarm(e.t, "set", a, want)
	got, err := e.s.GetAlarm(e.ctx, a.ID)
	mustOK(e.t, err, "GetAlarm")
	sameAlarm(e.t, "read back", got, want)

	noArgs := e.setAlarm(store.Alarm{ID: "alm_given", ObjectKey: k, Method: "tick", FireAt: objAt(0)})
	equal(e.t, "given id", noArgs.ID, "alm_given")
	if noArgs.Args != nil {
		e.t.Fatalf("alarm without args read back %s", noArgs.Args)
	}

	_, err = e.s.SetAlarm(e.ctx, &store.Alarm{ObjectKey: objKey("tnt_a", "counter", "missing"), Method: "m", FireAt: objAt(0)})
	mustErrIs(e.t, err, store.ErrNotFound, "SetAlarm on an unknown object")
	for name, bad := range map[string]store.Alarm{
		"no method":    {ObjectKey: k, FireAt: objAt(0)},
		"no fire time": {ObjectKey: k, Method: "m"},
		"bad args":     {ObjectKey: k, Method: "m", FireAt: objAt(0), Args: json.RawMessage(`{"a":`)},
	} {
		_, err := e.s.SetAlarm(e.ctx, &bad)
		mustErrIs(e.t, err, store.ErrInvalid, "SetAlarm with "+name)
	}
	equal(e.t, "pending alarms", e.pending(k), int64(2))
	_, err = e.s.GetAlarm(e.ctx, "alm_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetAlarm(unknown)")
}

func testAlarmReplace(e *objEnv) {
	k, other := objKey("tnt_a", "counter", "r"), objKey("tnt_a", "counter", "other")
	e.create(k)
	e.create(other)
	first := e.setAlarm(store.Alarm{ObjectKey: k, Method: "reset", Args: json.RawMessage(`{"v":1}`), FireAt: objAt(time.Hour)})
	tick := e.setAlarm(store.Alarm{ObjectKey: k, Method: "tick", FireAt: objAt(time.Minute)})
	elsewhere := e.setAlarm(store.Alarm{ObjectKey: other, Method: "reset", FireAt: objAt(time.Minute)})
	second := e.setAlarm(store.Alarm{ObjectKey: k, Method: "reset", Args: json.RawMessage(`{"v":2}`), FireAt: objAt(2 * time.Hour)})

	_, err := e.s.GetAlarm(e.ctx, first.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetAlarm of the replaced alarm")
	objSameList(e.t, "object's alarms", alarmIDs(e.alarms(k)), tick.ID, second.ID)
	got, err := e.s.GetAlarm(e.ctx, second.ID)
	mustOK(e.t, err, "GetAlarm of the replacement")
	jsonEq(e.t, "replacement Args", got.Args, `{"v":2}`)
	objSameTime(e.t, "replacement FireAt", got.FireAt, objAt(2*time.Hour))
	equal(e.t, "pending alarms", e.pending(k), int64(2))
	objSameList(e.t, "other object's alarms", alarmIDs(e.alarms(other)), elsewhere.ID)
}

func testAlarmFiredKept(e *objEnv) {
	k := objKey("tnt_a", "counter", "f")
	e.create(k)
	fired := e.setAlarm(store.Alarm{ID: "alm_1", ObjectKey: k, Method: "reset", FireAt: objAt(0)})
	mustOK(e.t, e.s.MarkAlarmFired(e.ctx, fired.ID, ""), "MarkAlarmFired")
	next := e.setAlarm(store.Alarm{ObjectKey: k, Method: "reset", FireAt: objAt(time.Hour)})
	objSameList(e.t, "alarms", alarmIDs(e.alarms(k)), fired.ID, next.ID)
	equal(e.t, "pending alarms", e.pending(k), int64(1))
	// A fired alarm's id stays taken.
	_, err := e.s.SetAlarm(e.ctx, &store.Alarm{ID: "alm_1", ObjectKey: k, Method: "other", FireAt: objAt(0)})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "SetAlarm with a fired alarm's id")
	objSameList(e.t, "alarms after the refused set", alarmIDs(e.alarms(k)), fired.ID, next.ID)
}

func testAlarmRace(e *objEnv) {
	const n = 20
	k := objKey("tnt_a", "counter", "race")
	e.create(k)
	errs := make([]error, n)
	race(n, func(i int) {
		_, errs[i] = e.s.SetAlarm(e.ctx, &store.Alarm{ObjectKey: k, Method: "reset",
			Args: json.RawMessage(fmt.Sprintf(`{"setter":%d}`, i)), FireAt: objAt(time.Duration(i) * time.Second)})
	})
	for i, err := range errs {
		mustOK(e.t, err, fmt.Sprintf("setter %d", i))
	}
	as := e.alarms(k)
	equal(e.t, "alarms after the race", len(as), 1)
	equal(e.t, "pending alarms after the race", e.pending(k), int64(1))
	// The survivor is one setter's alarm whole, never a mix.
	var setter int
	if err := json.Unmarshal(as[0].Args, &struct{ Setter *int }{&setter}); err != nil {
		e.t.Fatalf("survivor args %s: %v", as[0].Args, err)
	}
	objSameTime(e.t, "survivor FireAt", as[0].FireAt, objAt(time.Duration(setter)*time.Second))
}

func testAlarmDue(e *objEnv) {
	a, b := objKey("t1", "counter", "a"), objKey("t2", "timer", "b")
	e.create(a)
	e.create(b)
	e.setAlarm(store.Alarm{ID: "alm_late", ObjectKey: a, Method: "late", FireAt: objAt(2 * time.Hour)})
	e.setAlarm(store.Alarm{ID: "alm_b", ObjectKey: a, Method: "m1", FireAt: objAt(time.Minute)})
	e.setAlarm(store.Alarm{ID: "alm_a", ObjectKey: b, Method: "m1", FireAt: objAt(time.Minute)}) // same time: id order
	e.setAlarm(store.Alarm{ID: "alm_first", ObjectKey: b, Method: "m2", FireAt: objAt(0)})
	e.setAlarm(store.Alarm{ID: "alm_now", ObjectKey: a, Method: "m2", FireAt: objAt(time.Hour)}) // FireAt == now is due
	e.setAlarm(store.Alarm{ID: "alm_fired", ObjectKey: a, Method: "m3", FireAt: objAt(-time.Hour)})
	mustOK(e.t, e.s.MarkAlarmFired(e.ctx, "alm_fired", ""), "MarkAlarmFired")

	due := func(limit int) []string {
		as, err := e.s.DueAlarms(e.ctx, objAt(time.Hour), limit)
		mustOK(e.t, err, "DueAlarms")
		return alarmIDs(as)
	}
	objSameList(e.t, "due", due(0), "alm_first", "alm_a", "alm_b", "alm_now")
	objSameList(e.t, "due, limit 2", due(2), "alm_first", "alm_a")
	// A time in another zone is the same instant.
	as, err := e.s.DueAlarms(e.ctx, objAt(0).In(time.FixedZone("UTC+9", 9*3600)), 10)
	mustOK(e.t, err, "DueAlarms in another zone")
	objSameList(e.t, "due at the epoch", alarmIDs(as), "alm_first")

	mustOK(e.t, e.s.MarkAlarmFired(e.ctx, "alm_a", ""), "MarkAlarmFired")
	objSameList(e.t, "due after firing alm_a", due(0), "alm_first", "alm_b", "alm_now")
}

func testAlarmAttempts(e *objEnv) {
	k := objKey("t", "counter", "att")
	e.create(k)
	a := e.setAlarm(store.Alarm{ObjectKey: k, Method: "reset", FireAt: objAt(0)})
	r1, err := e.s.RecordAlarmAttempt(e.ctx, a.ID, "connection refused")
	mustOK(e.t, err, "RecordAlarmAttempt")
	r2, err := e.s.RecordAlarmAttempt(e.ctx, a.ID, "timeout after 30s")
	mustOK(e.t, err, "RecordAlarmAttempt again")
	equal(e.t, "Attempts", r1.Attempts, int64(1))
	equal(e.t, "Attempts", r2.Attempts, int64(2))
	equal(e.t, "LastError", r2.LastError, "timeout after 30s")
	equal(e.t, "Fired after attempts", r2.Fired, false)
	got, err := e.s.GetAlarm(e.ctx, a.ID)
	mustOK(e.t, err, "GetAlarm")
	sameAlarm(e.t, "read back after attempts", got, r2)
	due, err := e.s.DueAlarms(e.ctx, objAt(0), 0)
	mustOK(e.t, err, "DueAlarms")
	objSameList(e.t, "still due after failed attempts", alarmIDs(due), a.ID)

	mustOK(e.t, e.s.MarkAlarmFired(e.ctx, a.ID, "gave up after 3 attempts"), "MarkAlarmFired")
	got, err = e.s.GetAlarm(e.ctx, a.ID)
	mustOK(e.t, err, "GetAlarm after firing")
	equal(e.t, "Fired", got.Fired, true)
	equal(e.t, "LastError", got.LastError, "gave up after 3 attempts")
	equal(e.t, "Attempts", got.Attempts, int64(2))
	mustOK(e.t, e.s.MarkAlarmFired(e.ctx, a.ID, "gave up after 3 attempts"), "MarkAlarmFired twice")
	due, err = e.s.DueAlarms(e.ctx, objAt(time.Hour), 0)
	mustOK(e.t, err, "DueAlarms")
	objSameList(e.t, "due after firing", alarmIDs(due))
	equal(e.t, "pending", e.pending(k), int64(0))

	_, err = e.s.RecordAlarmAttempt(e.ctx, "alm_missing", "x")
	mustErrIs(e.t, err, store.ErrNotFound, "RecordAlarmAttempt(unknown)")
	mustErrIs(e.t, e.s.MarkAlarmFired(e.ctx, "alm_missing", ""), store.ErrNotFound, "MarkAlarmFired(unknown)")
}

func testAlarmListDelete(e *objEnv) {
	k := objKey("t", "counter", "ld")
	e.create(k)
	late := e.setAlarm(store.Alarm{ObjectKey: k, Method: "late", FireAt: objAt(time.Hour)})
	early := e.setAlarm(store.Alarm{ObjectKey: k, Method: "early", FireAt: objAt(-time.Hour)})
	mid := e.setAlarm(store.Alarm{ObjectKey: k, Method: "mid", FireAt: objAt(0)})
	mustOK(e.t, e.s.MarkAlarmFired(e.ctx, mid.ID, ""), "MarkAlarmFired")
	objSameList(e.t, "by FireAt, fired included", alarmIDs(e.alarms(k)), early.ID, mid.ID, late.ID)
	objSameList(e.t, "unknown object", alarmIDs(e.alarms(objKey("t", "counter", "missing"))))
	equal(e.t, "pending", e.pending(k), int64(2))

	mustOK(e.t, e.s.DeleteAlarm(e.ctx, early.ID), "DeleteAlarm")
	_, err := e.s.GetAlarm(e.ctx, early.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetAlarm after delete")
	mustErrIs(e.t, e.s.DeleteAlarm(e.ctx, early.ID), store.ErrNotFound, "DeleteAlarm twice")
	objSameList(e.t, "after delete", alarmIDs(e.alarms(k)), mid.ID, late.ID)
	equal(e.t, "pending after delete", e.pending(k), int64(1))
}
