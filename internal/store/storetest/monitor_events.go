package storetest

import (
	"encoding/json"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var monEventCases = []monCase{
	{"AppendListDenseSeq", testMonEventsAppend},
	{"ActivitySummary", testMonActivity},
	{"ResumeAfterCompletion", testMonActivityResume},
	{"BadEventsWriteNothing", testMonEventsInvalid},
	{"ListActivities", testMonListActivities},
}

func hb(status store.HeartbeatStatus, at time.Time) store.NewAgentEvent {
	return store.NewAgentEvent{Type: store.EventHeartbeat, HeartbeatStatus: status, OccurredAt: at}
}

func ev(typ string, at time.Time) store.NewAgentEvent {
	return store.NewAgentEvent{Type: typ, OccurredAt: at}
}

func (e *monEnv) appendEvents(sandbox string, received time.Time, evs ...store.NewAgentEvent) []store.AgentEvent {
	e.t.Helper()
	out, err := e.s.AppendAgentEvents(e.ctx, store.AppendAgentEventsParams{SandboxID: sandbox, Events: evs, ReceivedAt: received})
	mustOK(e.t, err, "AppendAgentEvents")
	return out
}

func (e *monEnv) activity(sandbox string) *store.AgentActivity {
	e.t.Helper()
	a, err := e.s.GetActivity(e.ctx, sandbox)
	mustOK(e.t, err, "GetActivity "+sandbox)
	return a
}

func testMonEventsAppend(e *monEnv) {
	_, err := e.s.GetActivity(e.ctx, "sbx_1")
	mustErrIs(e.t, err, store.ErrNotFound, "GetActivity before events")
	first := e.appendEvents("sbx_1", monAt(time.Second),
		store.NewAgentEvent{Type: store.EventStarted, Payload: json.RawMessage(`{"agent":"claude"}`), OccurredAt: monAt(0)},
		hb(store.HeartbeatRunning, time.Time{}))
	equal(e.t, "first seq", first[0].Seq, int64(1))
	equal(e.t, "second seq", first[1].Seq, int64(2))
	monSameTime(e.t, "zero OccurredAt is ReceivedAt", first[1].OccurredAt, monAt(time.Second))
	second := e.appendEvents("sbx_1", monAt(2*time.Second), ev(store.EventToolUse, monAt(2*time.Second)))
	equal(e.t, "third seq", second[0].Seq, int64(3))
	e.appendEvents("sbx_2", monAt(2*time.Second), ev(store.EventThinking, monAt(2*time.Second)))

	all, err := e.s.ListAgentEvents(e.ctx, store.ListAgentEventsParams{SandboxID: "sbx_1"})
	mustOK(e.t, err, "ListAgentEvents")
	equal(e.t, "event count", len(all), 3)
	for i, got := range all {
		equal(e.t, "seq", got.Seq, int64(i+1))
		equal(e.t, "sandbox", got.SandboxID, "sbx_1")
	}
	equal(e.t, "type", all[0].Type, store.EventStarted)
	jsonEq(e.t, "payload", all[0].Payload, `{"agent":"claude"}`)
	monSameTime(e.t, "occurred", all[0].OccurredAt, monAt(0))
	monSameTime(e.t, "received", all[0].ReceivedAt, monAt(time.Second))
	equal(e.t, "heartbeat status", all[1].HeartbeatStatus, store.HeartbeatRunning)
	if all[2].Payload != nil {
		e.t.Fatalf("event without payload reads back %q, want nil", all[2].Payload)
	}
	page, err := e.s.ListAgentEvents(e.ctx, store.ListAgentEventsParams{SandboxID: "sbx_1", AfterSeq: 1, Limit: 1})
	mustOK(e.t, err, "ListAgentEvents page")
	equal(e.t, "page length", len(page), 1)
	equal(e.t, "page seq", page[0].Seq, int64(2))
	none, err := e.s.ListAgentEvents(e.ctx, store.ListAgentEventsParams{SandboxID: "sbx_none"})
	mustOK(e.t, err, "ListAgentEvents unknown sandbox")
	equal(e.t, "unknown sandbox events", len(none), 0)
}

func testMonActivity(e *monEnv) {
	e.appendEvents("sbx_1", monAt(10*time.Second),
		hb(store.HeartbeatIdle, monAt(1*time.Second)),
		ev(store.EventStarted, monAt(2*time.Second)),
		hb(store.HeartbeatRunning, monAt(3*time.Second)))
	a := e.activity("sbx_1")
	monSameTimePtr(e.t, "first heartbeat", a.FirstHeartbeatAt, ptr(monAt(time.Second)))
	monSameTimePtr(e.t, "last heartbeat", a.LastHeartbeatAt, ptr(monAt(3*time.Second)))
	equal(e.t, "heartbeat status", a.LastHeartbeatStatus, store.HeartbeatRunning)
	monSameTimePtr(e.t, "started", a.StartedAt, ptr(monAt(2*time.Second)))
	if a.LastWorkEventAt != nil || a.LatestCompletedAt != nil {
		e.t.Fatalf("no work yet, got last work %v completed %v", a.LastWorkEventAt, a.LatestCompletedAt)
	}
	equal(e.t, "work count", a.WorkEventCount, int64(0))

	e.appendEvents("sbx_1", monAt(20*time.Second),
		ev(store.EventToolUse, monAt(4*time.Second)),
		ev(store.EventThinking, monAt(5*time.Second)),
		ev(store.EventFileEdited, monAt(6*time.Second)),
		ev(store.EventError, monAt(7*time.Second)),
		ev(store.EventCompleted, monAt(8*time.Second)),
		hb(store.HeartbeatIdle, monAt(9*time.Second)))
	a = e.activity("sbx_1")
	monSameTimePtr(e.t, "first heartbeat kept", a.FirstHeartbeatAt, ptr(monAt(time.Second)))
	monSameTimePtr(e.t, "last heartbeat", a.LastHeartbeatAt, ptr(monAt(9*time.Second)))
	equal(e.t, "heartbeat status", a.LastHeartbeatStatus, store.HeartbeatIdle)
	// agent.completed is itself a work event (the seed lists it).
	monSameTimePtr(e.t, "last work", a.LastWorkEventAt, ptr(monAt(8*time.Second)))
	equal(e.t, "last work type", a.LastWorkEventType, store.EventCompleted)
	equal(e.t, "last work seq", a.LastWorkEventSeq, int64(8))
	monSameTimePtr(e.t, "completed", a.LatestCompletedAt, ptr(monAt(8*time.Second)))
	equal(e.t, "completed seq", a.LatestCompletedSeq, int64(8))
	equal(e.t, "events", a.EventCount, int64(9))
	equal(e.t, "heartbeats", a.HeartbeatCount, int64(3))
	equal(e.t, "work events", a.WorkEventCount, int64(3))
	equal(e.t, "completions", a.CompletedCount, int64(1))
	equal(e.t, "last seq", a.LastSeq, int64(9))
	monSameTime(e.t, "first event", a.FirstEventAt, monAt(time.Second))
	monSameTime(e.t, "last event", a.LastEventAt, monAt(9*time.Second))
	monSameTime(e.t, "last received", a.LastReceivedAt, monAt(20*time.Second))
}

// testMonActivityResume: the seed's Problem 1. Work after the latest
// agent.completed must be visible in the summary (LastWorkEventSeq beyond
// LatestCompletedSeq), and a second completion moves LatestCompleted.
func testMonActivityResume(e *monEnv) {
	e.appendEvents("sbx_1", monAt(0), ev(store.EventCompleted, monAt(time.Second)))
	e.appendEvents("sbx_1", monAt(0), ev(store.EventToolResult, monAt(2*time.Second)), hb(store.HeartbeatIdle, monAt(3*time.Second)))
	a := e.activity("sbx_1")
	if a.LastWorkEventSeq <= a.LatestCompletedSeq || !a.LastWorkEventAt.After(*a.LatestCompletedAt) {
		e.t.Fatalf("resumed work not after completion: work seq %d at %v, completed seq %d at %v",
			a.LastWorkEventSeq, a.LastWorkEventAt, a.LatestCompletedSeq, a.LatestCompletedAt)
	}
	e.appendEvents("sbx_1", monAt(0), ev(store.EventCompleted, monAt(4*time.Second)))
	a = e.activity("sbx_1")
	monSameTimePtr(e.t, "latest completion", a.LatestCompletedAt, ptr(monAt(4*time.Second)))
	equal(e.t, "latest completion seq", a.LatestCompletedSeq, int64(4))
	equal(e.t, "work seq equals completion", a.LastWorkEventSeq, int64(4))
	equal(e.t, "completions", a.CompletedCount, int64(2))
}

func testMonEventsInvalid(e *monEnv) {
	e.appendEvents("sbx_1", monAt(0), hb(store.HeartbeatRunning, monAt(0)))
	bad := map[string]store.NewAgentEvent{
		"unknown type":              {Type: "agent.exploded"},
		"heartbeat without status":  {Type: store.EventHeartbeat},
		"heartbeat with bad status": {Type: store.EventHeartbeat, HeartbeatStatus: "sleeping"},
		"status on a non-heartbeat": {Type: store.EventToolUse, HeartbeatStatus: store.HeartbeatRunning},
		"payload not JSON":          {Type: store.EventToolUse, Payload: json.RawMessage(`{nope`)},
	}
	for what, b := range bad {
		// The good first event must not be written either: a batch is atomic.
		_, err := e.s.AppendAgentEvents(e.ctx, store.AppendAgentEventsParams{SandboxID: "sbx_1",
			Events: []store.NewAgentEvent{ev(store.EventToolUse, monAt(time.Second)), b}})
		mustErrIs(e.t, err, store.ErrInvalid, "AppendAgentEvents "+what)
	}
	_, err := e.s.AppendAgentEvents(e.ctx, store.AppendAgentEventsParams{Events: []store.NewAgentEvent{hb(store.HeartbeatIdle, monAt(0))}})
	mustErrIs(e.t, err, store.ErrInvalid, "AppendAgentEvents without sandbox")
	all, err := e.s.ListAgentEvents(e.ctx, store.ListAgentEventsParams{SandboxID: "sbx_1"})
	mustOK(e.t, err, "ListAgentEvents")
	equal(e.t, "events after refused batches", len(all), 1)
	a := e.activity("sbx_1")
	equal(e.t, "activity count after refused batches", a.EventCount, int64(1))
	equal(e.t, "no work recorded", a.WorkEventCount, int64(0))
}

func testMonListActivities(e *monEnv) {
	for _, id := range []string{"sbx_c", "sbx_a", "sbx_b"} {
		e.appendEvents(id, monAt(0), hb(store.HeartbeatRunning, monAt(0)))
	}
	id := func(a *store.AgentActivity) string { return a.SandboxID }
	all, err := e.s.ListActivities(e.ctx, store.ListActivitiesParams{})
	mustOK(e.t, err, "ListActivities")
	monEqualIDs(e.t, "all", monIDs(all, id), "sbx_a", "sbx_b", "sbx_c")
	_, err = e.s.RecordTermination(e.ctx, &store.Termination{SandboxID: "sbx_b", Reason: store.TerminationIdle, At: monAt(time.Minute)})
	mustOK(e.t, err, "RecordTermination")
	live, err := e.s.ListActivities(e.ctx, store.ListActivitiesParams{})
	mustOK(e.t, err, "ListActivities after termination")
	monEqualIDs(e.t, "live", monIDs(live, id), "sbx_a", "sbx_c")
	with, err := e.s.ListActivities(e.ctx, store.ListActivitiesParams{IncludeTerminated: true, AfterSandboxID: "sbx_a", Limit: 1})
	mustOK(e.t, err, "ListActivities with terminated")
	monEqualIDs(e.t, "page with terminated", monIDs(with, id), "sbx_b")
	monSameTimePtr(e.t, "terminated at", with[0].TerminatedAt, ptr(monAt(time.Minute)))
	// Events after a termination still append (a late agent) and keep the mark.
	e.appendEvents("sbx_b", monAt(2*time.Minute), hb(store.HeartbeatIdle, monAt(2*time.Minute)))
	monSameTimePtr(e.t, "terminated kept", e.activity("sbx_b").TerminatedAt, ptr(monAt(time.Minute)))
}
