package storetest

import (
	"encoding/json"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var monTaskCases = []monCase{
	{"CreateGetDefaults", testMonTaskCreate},
	{"CreateValidates", testMonTaskValidate},
	{"ListFilters", testMonTaskList},
	{"TransitionLifecycle", testMonTaskLifecycle},
	{"TransitionMismatchWritesNothing", testMonTaskMismatch},
	{"CompletedNeverFailed", testMonTaskCompletedStays},
}

func testMonTaskCreate(e *monEnv) {
	tk := e.ticket("tnt_a")
	in := &store.Task{TenantID: "tnt_a", TicketID: tk.ID, Command: json.RawMessage(`["agent","--go"]`),
		Env: json.RawMessage(`{"A":"1"}`), SandboxSpec: json.RawMessage(`{"image":"alpine"}`),
		TranscriptPath: "/work/transcript.jsonl", CreatedAt: monAt(0)}
	task, err := e.s.CreateTask(e.ctx, in)
	mustOK(e.t, err, "CreateTask")
	if len(task.ID) < 5 || task.ID[:4] != "tsk_" {
		e.t.Fatalf("generated id %q: want prefix tsk_", task.ID)
	}
	equal(e.t, "kind", task.Kind, store.TaskAgent)
	equal(e.t, "status", task.Status, store.TaskPending)
	equal(e.t, "version", task.Version, int64(1))
	got, err := e.s.GetTask(e.ctx, task.ID)
	mustOK(e.t, err, "GetTask")
	jsonEq(e.t, "command", got.Command, `["agent","--go"]`)
	jsonEq(e.t, "env", got.Env, `{"A":"1"}`)
	jsonEq(e.t, "spec", got.SandboxSpec, `{"image":"alpine"}`)
	equal(e.t, "ticket", got.TicketID, tk.ID)
	equal(e.t, "transcript path", got.TranscriptPath, "/work/transcript.jsonl")
	monSameTime(e.t, "created", got.CreatedAt, monAt(0))
	if got.StartedAt != nil || got.FinishedAt != nil || got.Result != nil {
		e.t.Fatalf("new task has started %v finished %v result %s, want none", got.StartedAt, got.FinishedAt, got.Result)
	}
	bare := e.task(store.Task{})
	jsonEq(e.t, "default env", bare.Env, `{}`)
	jsonEq(e.t, "default spec", bare.SandboxSpec, `{}`)
	_, err = e.s.CreateTask(e.ctx, &store.Task{ID: bare.ID, Command: json.RawMessage(`["x"]`)})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateTask duplicate")
	_, err = e.s.GetTask(e.ctx, "tsk_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetTask missing")
}

func testMonTaskValidate(e *monEnv) {
	cases := map[string]store.Task{
		"no command":      {},
		"command object":  {Command: json.RawMessage(`{"a":1}`)},
		"empty argv":      {Command: json.RawMessage(`[]`)},
		"argv of numbers": {Command: json.RawMessage(`[1,2]`)},
		"env not object":  {Command: json.RawMessage(`["x"]`), Env: json.RawMessage(`[1]`)},
		"spec not object": {Command: json.RawMessage(`["x"]`), SandboxSpec: json.RawMessage(`"s"`)},
		"bad kind":        {Command: json.RawMessage(`["x"]`), Kind: "cron"},
		"bad status":      {Command: json.RawMessage(`["x"]`), Status: "done"},
		"bad result JSON": {Command: json.RawMessage(`["x"]`), Result: json.RawMessage(`{`)},
	}
	for what, tk := range cases {
		_, err := e.s.CreateTask(e.ctx, &tk)
		mustErrIs(e.t, err, store.ErrInvalid, "CreateTask "+what)
	}
	_, err := e.s.CreateTask(e.ctx, &store.Task{TicketID: "tkt_missing", Command: json.RawMessage(`["x"]`)})
	mustErrIs(e.t, err, store.ErrNotFound, "CreateTask unknown ticket")
}

func testMonTaskList(e *monEnv) {
	t1, t2 := e.ticket("tnt_a"), e.ticket("tnt_b")
	a := e.task(store.Task{TenantID: "tnt_a", TicketID: t1.ID, SandboxID: "sbx_1"})
	b := e.task(store.Task{TenantID: "tnt_a", TicketID: t1.ID, Kind: store.TaskDiagnostic, DiagnosticOf: a.ID})
	c := e.task(store.Task{TenantID: "tnt_b", TicketID: t2.ID, Status: store.TaskRunning})
	id := func(t *store.Task) string { return t.ID }
	list := func(p store.ListTasksParams) []string {
		e.t.Helper()
		out, err := e.s.ListTasks(e.ctx, p)
		mustOK(e.t, err, "ListTasks")
		return monIDs(out, id)
	}
	monEqualIDs(e.t, "all", list(store.ListTasksParams{}), a.ID, b.ID, c.ID)
	monEqualIDs(e.t, "by ticket", list(store.ListTasksParams{TicketID: t1.ID}), a.ID, b.ID)
	monEqualIDs(e.t, "by tenant", list(store.ListTasksParams{TenantID: "tnt_b"}), c.ID)
	monEqualIDs(e.t, "by sandbox", list(store.ListTasksParams{SandboxID: "sbx_1"}), a.ID)
	monEqualIDs(e.t, "by kind", list(store.ListTasksParams{Kind: store.TaskDiagnostic}), b.ID)
	monEqualIDs(e.t, "active", list(store.ListTasksParams{Statuses: []store.TaskStatus{store.TaskRunning}}), c.ID)
	monEqualIDs(e.t, "pending or running",
		list(store.ListTasksParams{Statuses: []store.TaskStatus{store.TaskPending, store.TaskRunning}}), a.ID, b.ID, c.ID)
	monEqualIDs(e.t, "page", list(store.ListTasksParams{AfterID: a.ID, Limit: 1}), b.ID)
	got, err := e.s.GetTask(e.ctx, b.ID)
	mustOK(e.t, err, "GetTask diagnostic")
	equal(e.t, "diagnostic_of", got.DiagnosticOf, a.ID)
}

func (e *monEnv) transition(id string, from []store.TaskStatus, to store.TaskStatus, patch store.TaskPatch, at time.Time) store.TaskTransition {
	e.t.Helper()
	res, err := e.s.TransitionTask(e.ctx, store.TransitionTaskParams{ID: id, From: from, To: to, Patch: patch, At: at})
	mustOK(e.t, err, "TransitionTask "+string(to))
	return res
}

func testMonTaskLifecycle(e *monEnv) {
	task := e.task(store.Task{})
	res := e.transition(task.ID, []store.TaskStatus{store.TaskPending}, store.TaskClaiming, store.TaskPatch{}, monAt(time.Second))
	equal(e.t, "claim ok", res.OK, true)
	equal(e.t, "claim version", res.Task.Version, int64(2))
	res = e.transition(task.ID, []store.TaskStatus{store.TaskClaiming}, store.TaskAssigned,
		store.TaskPatch{SandboxID: ptr("sbx_9")}, monAt(2*time.Second))
	equal(e.t, "assign ok", res.OK, true)
	equal(e.t, "sandbox", res.Task.SandboxID, "sbx_9")
	// From == To: a patch without a status change.
	res = e.transition(task.ID, []store.TaskStatus{store.TaskAssigned}, store.TaskAssigned,
		store.TaskPatch{ProcessID: ptr("proc_1")}, monAt(3*time.Second))
	equal(e.t, "patch ok", res.OK, true)
	equal(e.t, "patch keeps sandbox", res.Task.SandboxID, "sbx_9")
	equal(e.t, "process", res.Task.ProcessID, "proc_1")
	if res.Task.StartedAt != nil {
		e.t.Fatalf("StartedAt set before running: %v", res.Task.StartedAt)
	}
	res = e.transition(task.ID, []store.TaskStatus{store.TaskAssigned}, store.TaskRunning, store.TaskPatch{}, monAt(4*time.Second))
	monSameTimePtr(e.t, "started", res.Task.StartedAt, ptr(monAt(4*time.Second)))
	res = e.transition(task.ID, []store.TaskStatus{store.TaskRunning}, store.TaskRunning, store.TaskPatch{}, monAt(5*time.Second))
	monSameTimePtr(e.t, "started kept on re-entry", res.Task.StartedAt, ptr(monAt(4*time.Second)))
	res = e.transition(task.ID, store.ActiveTaskStatuses(), store.TaskCompleted,
		store.TaskPatch{Result: json.RawMessage(`{"ok":true}`)}, monAt(6*time.Second))
	equal(e.t, "complete ok", res.OK, true)
	monSameTimePtr(e.t, "finished", res.Task.FinishedAt, ptr(monAt(6*time.Second)))
	monSameTime(e.t, "updated", res.Task.UpdatedAt, monAt(6*time.Second))
	equal(e.t, "version", res.Task.Version, int64(7))
	got, err := e.s.GetTask(e.ctx, task.ID)
	mustOK(e.t, err, "GetTask")
	equal(e.t, "status", got.Status, store.TaskCompleted)
	jsonEq(e.t, "result", got.Result, `{"ok":true}`)
	equal(e.t, "process kept", got.ProcessID, "proc_1")
	monSameTimePtr(e.t, "read finished", got.FinishedAt, ptr(monAt(6*time.Second)))

	_, err = e.s.TransitionTask(e.ctx, store.TransitionTaskParams{ID: "tsk_missing",
		From: []store.TaskStatus{store.TaskPending}, To: store.TaskRunning})
	mustErrIs(e.t, err, store.ErrNotFound, "TransitionTask missing")
	_, err = e.s.TransitionTask(e.ctx, store.TransitionTaskParams{ID: task.ID, To: store.TaskRunning})
	mustErrIs(e.t, err, store.ErrInvalid, "TransitionTask without From")
	_, err = e.s.TransitionTask(e.ctx, store.TransitionTaskParams{ID: task.ID,
		From: []store.TaskStatus{store.TaskPending}, To: "done"})
	mustErrIs(e.t, err, store.ErrInvalid, "TransitionTask bad To")
}

func testMonTaskMismatch(e *monEnv) {
	task := e.task(store.Task{})
	res := e.transition(task.ID, []store.TaskStatus{store.TaskRunning, store.TaskAssigned}, store.TaskCompleted,
		store.TaskPatch{FailureReason: ptr("x"), SandboxID: ptr("sbx_x")}, monAt(time.Second))
	equal(e.t, "mismatch ok", res.OK, false)
	if res.Task == nil {
		e.t.Fatal("mismatch returned no current task")
	}
	equal(e.t, "current status", res.Task.Status, store.TaskPending)
	equal(e.t, "current version", res.Task.Version, int64(1))
	got, err := e.s.GetTask(e.ctx, task.ID)
	mustOK(e.t, err, "GetTask")
	equal(e.t, "failure reason untouched", got.FailureReason, "")
	equal(e.t, "sandbox untouched", got.SandboxID, "")
	equal(e.t, "version untouched", got.Version, int64(1))
}

// testMonTaskCompletedStays is the seed's rule: a termination moves a task
// to failed only from an active state, so a completed task stays completed.
func testMonTaskCompletedStays(e *monEnv) {
	task := e.task(store.Task{Status: store.TaskRunning})
	e.transition(task.ID, []store.TaskStatus{store.TaskRunning}, store.TaskCompleted, store.TaskPatch{}, monAt(time.Second))
	res := e.transition(task.ID, store.ActiveTaskStatuses(), store.TaskFailed,
		store.TaskPatch{FailureReason: ptr(string(store.TerminationIdle))}, monAt(2*time.Second))
	equal(e.t, "stale fail ok", res.OK, false)
	equal(e.t, "status seen", res.Task.Status, store.TaskCompleted)
	got, err := e.s.GetTask(e.ctx, task.ID)
	mustOK(e.t, err, "GetTask")
	equal(e.t, "status", got.Status, store.TaskCompleted)
	equal(e.t, "failure reason", got.FailureReason, "")
}
