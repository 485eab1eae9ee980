package storetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var monRaceCases = []monCase{
	{"TaskCASOneWinner", testMonTaskRace},
	{"CompleteVersusTerminate", testMonCompleteTerminateRace},
	{"DiagnosticClaimOneWinner", testMonDiagnosticRace},
	{"TerminationOneWinner", testMonTerminationRace},
	{"EventAppendsDenseAndSummaryExact", testMonEventRace},
}

// testMonTaskRace: 20 claimers of one pending task, exactly one wins and
// every loser sees the winner's status.
func testMonTaskRace(e *monEnv) {
	task := e.task(store.Task{})
	var wins atomic.Int64
	errs := make([]error, 20)
	race(20, func(i int) {
		res, err := e.s.TransitionTask(e.ctx, store.TransitionTaskParams{ID: task.ID,
			From: []store.TaskStatus{store.TaskPending}, To: store.TaskClaiming,
			Patch: store.TaskPatch{SandboxID: ptr(fmt.Sprintf("sbx_%d", i))}})
		if err != nil {
			errs[i] = err
			return
		}
		if res.OK {
			wins.Add(1)
		} else if res.Task.Status != store.TaskClaiming {
			errs[i] = fmt.Errorf("loser %d saw status %s, want claiming", i, res.Task.Status)
		}
	})
	mustOK(e.t, errors.Join(errs...), "racing TransitionTask")
	equal(e.t, "winners", wins.Load(), int64(1))
	got, err := e.s.GetTask(e.ctx, task.ID)
	mustOK(e.t, err, "GetTask")
	equal(e.t, "version", got.Version, int64(2))
}

// testMonCompleteTerminateRace: the agent completes while the monitor (on
// two nodes) terminates for idleness. Whatever the order, the task ends in
// exactly one terminal state with one writer, and if completion won it
// stays completed.
func testMonCompleteTerminateRace(e *monEnv) {
	for round := range 5 {
		task := e.task(store.Task{Status: store.TaskRunning})
		var wins atomic.Int64
		var completedWon atomic.Bool
		errs := make([]error, 3)
		race(3, func(i int) {
			to, patch := store.TaskFailed, store.TaskPatch{FailureReason: ptr(string(store.TerminationIdle))}
			if i == 0 {
				to, patch = store.TaskCompleted, store.TaskPatch{Result: json.RawMessage(`{"ok":true}`)}
			}
			res, err := e.s.TransitionTask(e.ctx, store.TransitionTaskParams{ID: task.ID,
				From: store.ActiveTaskStatuses(), To: to, Patch: patch})
			if err != nil {
				errs[i] = err
				return
			}
			if res.OK {
				wins.Add(1)
				completedWon.Store(i == 0)
			}
		})
		mustOK(e.t, errors.Join(errs...), "racing transitions")
		equal(e.t, fmt.Sprintf("round %d winners", round), wins.Load(), int64(1))
		got, err := e.s.GetTask(e.ctx, task.ID)
		mustOK(e.t, err, "GetTask")
		if completedWon.Load() {
			equal(e.t, "completed stays completed", got.Status, store.TaskCompleted)
			equal(e.t, "no failure reason on a completed task", got.FailureReason, "")
		} else {
			equal(e.t, "failed", got.Status, store.TaskFailed)
		}
		equal(e.t, "one write", got.Version, int64(2))
	}
}

// testMonDiagnosticRace: 20 callers on "two nodes" (two distinct rule
// sets and clocks, as two daemons would have) claim one stuck ticket:
// exactly one diagnostic is spawned and the rest are refused as pending.
func testMonDiagnosticRace(e *monEnv) {
	tk := e.ticket("tnt_a")
	var wins atomic.Int64
	errs := make([]error, 20)
	race(20, func(i int) {
		now := monAt(time.Duration(i%2) * time.Second)
		c, err := e.s.ClaimDiagnosticSpawn(e.ctx, store.ClaimDiagnosticParams{TicketID: tk.ID, Now: now, Rules: monRules,
			Task: &store.Task{ID: fmt.Sprintf("tsk_diag_%02d", i), Command: json.RawMessage(`["diagnose"]`)}})
		switch {
		case err != nil:
			errs[i] = err
		case c.OK:
			wins.Add(1)
		case c.Refusal != store.RefusedPending:
			errs[i] = fmt.Errorf("caller %d refused for %q, want %q", i, c.Refusal, store.RefusedPending)
		}
	})
	mustOK(e.t, errors.Join(errs...), "racing ClaimDiagnosticSpawn")
	equal(e.t, "winners", wins.Load(), int64(1))
	state, err := e.s.GetDiagnosticState(e.ctx, tk.ID)
	mustOK(e.t, err, "GetDiagnosticState")
	equal(e.t, "attempts", state.Attempts, int64(1))
	diags, err := e.s.ListTasks(e.ctx, store.ListTasksParams{TicketID: tk.ID, Kind: store.TaskDiagnostic})
	mustOK(e.t, err, "ListTasks")
	equal(e.t, "diagnostic tasks", len(diags), 1)
	equal(e.t, "pending is the created task", state.PendingTaskID, diags[0].ID)
}

func testMonTerminationRace(e *monEnv) {
	e.appendEvents("sbx_1", monAt(0), hb(store.HeartbeatIdle, monAt(0)))
	var wins atomic.Int64
	errs := make([]error, 20)
	race(20, func(i int) {
		_, err := e.s.RecordTermination(e.ctx, &store.Termination{SandboxID: "sbx_1", Reason: store.TerminationIdle,
			Node: fmt.Sprintf("node-%d", i%2), At: monAt(time.Minute)})
		switch {
		case err == nil:
			wins.Add(1)
		case !errors.Is(err, store.ErrAlreadyExists):
			errs[i] = err
		}
	})
	mustOK(e.t, errors.Join(errs...), "racing RecordTermination")
	equal(e.t, "winners", wins.Load(), int64(1))
}

// testMonEventRace: 8 agents' worth of concurrent single and batch appends
// to one sandbox. Seq is dense, and the summary equals the fold of the
// stored events computed here independently of the engine.
func testMonEventRace(e *monEnv) {
	const workers, perWorker = 8, 15
	kinds := []string{store.EventToolUse, store.EventThinking, store.EventHeartbeat, store.EventCompleted,
		store.EventFileEdited, store.EventError}
	errs := make([]error, workers)
	race(workers, func(w int) {
		for j := range perWorker {
			typ := kinds[(w+j)%len(kinds)]
			ne := store.NewAgentEvent{Type: typ, OccurredAt: monAt(time.Duration(w*perWorker+j) * time.Millisecond)}
			if typ == store.EventHeartbeat {
				ne.HeartbeatStatus = []store.HeartbeatStatus{store.HeartbeatIdle, store.HeartbeatRunning}[j%2]
			}
			batch := []store.NewAgentEvent{ne}
			if j%5 == 0 {
				batch = append(batch, store.NewAgentEvent{Type: store.EventToolResult, OccurredAt: ne.OccurredAt})
			}
			if _, err := e.s.AppendAgentEvents(e.ctx, store.AppendAgentEventsParams{SandboxID: "sbx_race",
				Events: batch, ReceivedAt: monAt(time.Hour)}); err != nil {
				errs[w] = err
				return
			}
		}
	})
	mustOK(e.t, errors.Join(errs...), "racing AppendAgentEvents")
	all, err := e.s.ListAgentEvents(e.ctx, store.ListAgentEventsParams{SandboxID: "sbx_race"})
	mustOK(e.t, err, "ListAgentEvents")
	want := workers * (perWorker + 3) // every fifth call carries a second event
	equal(e.t, "events stored", len(all), want)
	var (
		hbs, work, done               int64
		firstHB, lastHB, lastW, lastC *time.Time
		lastStatus                    store.HeartbeatStatus
		lastWSeq, lastCSeq            int64
	)
	for i, ev := range all {
		equal(e.t, "dense seq", ev.Seq, int64(i+1))
		at := ev.OccurredAt
		switch ev.Type {
		case store.EventHeartbeat:
			hbs++
			if firstHB == nil {
				firstHB = &at
			}
			lastHB, lastStatus = &at, ev.HeartbeatStatus
		case store.EventCompleted:
			done++
			lastC, lastCSeq = &at, ev.Seq
		}
		switch ev.Type {
		case store.EventToolUse, store.EventCompleted, store.EventFileEdited, store.EventToolResult:
			work++
			lastW, lastWSeq = &at, ev.Seq
		}
	}
	a := e.activity("sbx_race")
	equal(e.t, "summary events", a.EventCount, int64(want))
	equal(e.t, "summary last seq", a.LastSeq, int64(want))
	equal(e.t, "summary heartbeats", a.HeartbeatCount, hbs)
	equal(e.t, "summary work", a.WorkEventCount, work)
	equal(e.t, "summary completions", a.CompletedCount, done)
	equal(e.t, "summary heartbeat status", a.LastHeartbeatStatus, lastStatus)
	equal(e.t, "summary work seq", a.LastWorkEventSeq, lastWSeq)
	equal(e.t, "summary completion seq", a.LatestCompletedSeq, lastCSeq)
	monSameTimePtr(e.t, "summary first heartbeat", a.FirstHeartbeatAt, firstHB)
	monSameTimePtr(e.t, "summary last heartbeat", a.LastHeartbeatAt, lastHB)
	monSameTimePtr(e.t, "summary last work", a.LastWorkEventAt, lastW)
	monSameTimePtr(e.t, "summary completion", a.LatestCompletedAt, lastC)
	monSameTime(e.t, "summary first event", a.FirstEventAt, all[0].OccurredAt)
	monSameTime(e.t, "summary last event", a.LastEventAt, all[len(all)-1].OccurredAt)
}
