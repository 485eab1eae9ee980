package storetest

import (
	"strings"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var opTaskCases = []opCase{
	{"CreateAndGet", testOpTaskCreate},
	{"CreateDefaults", testOpTaskDefaults},
	{"CreateDuplicateOrInvalid", testOpTaskCreateBad},
	{"UpdateWritesStatusAndExitCode", testOpTaskUpdate},
	{"ListFilters", testOpTaskList},
}

// opFullTask has every field set to a non-zero value.
func opFullTask(id string) store.BackgroundTask {
	return store.BackgroundTask{
		ID: id, SessionID: "sesn_ops", SandboxID: "sbx_1", ProcessID: "proc_7", Command: "npm run dev",
		Status: "exited", ExitCode: ptr(int64(3)), StartedAt: opAt(0), Deadline: opAt(10 * time.Minute),
		UpdatedAt: opAt(time.Minute),
	}
}

func (e *opEnv) createTask(t store.BackgroundTask) *store.BackgroundTask {
	e.t.Helper()
	out, err := e.s.CreateBackgroundTask(e.ctx, &t)
	mustOK(e.t, err, "CreateBackgroundTask")
	return out
}

func (e *opEnv) getTask(id string) *store.BackgroundTask {
	e.t.Helper()
	out, err := e.s.GetBackgroundTask(e.ctx, id)
	mustOK(e.t, err, "GetBackgroundTask")
	return out
}

func opSameTask(e *opEnv, what string, got, want *store.BackgroundTask) {
	e.t.Helper()
	equal(e.t, what+" ID", got.ID, want.ID)
	equal(e.t, what+" SessionID", got.SessionID, want.SessionID)
	equal(e.t, what+" SandboxID", got.SandboxID, want.SandboxID)
	equal(e.t, what+" ProcessID", got.ProcessID, want.ProcessID)
	equal(e.t, what+" Command", got.Command, want.Command)
	equal(e.t, what+" Status", got.Status, want.Status)
	switch {
	case got.ExitCode == nil && want.ExitCode == nil:
	case got.ExitCode == nil || want.ExitCode == nil:
		e.t.Fatalf("%s ExitCode: got %v, want %v", what, got.ExitCode, want.ExitCode)
	default:
		equal(e.t, what+" ExitCode", *got.ExitCode, *want.ExitCode)
	}
	sbSameTime(e.t, what+" StartedAt", got.StartedAt, want.StartedAt)
	sbSameTime(e.t, what+" Deadline", got.Deadline, want.Deadline)
	sbSameTime(e.t, what+" UpdatedAt", got.UpdatedAt, want.UpdatedAt)
}

func testOpTaskCreate(e *opEnv) {
	in := opFullTask("bgt_full")
	opSameTask(e, "CreateBackgroundTask", e.createTask(in), &in)
	opSameTask(e, "GetBackgroundTask", e.getTask(in.ID), &in)
	_, err := e.s.GetBackgroundTask(e.ctx, "bgt_none")
	mustErrIs(e.t, err, store.ErrNotFound, "GetBackgroundTask of an unknown task")
}

// testOpTaskDefaults: a new task is running, has a generated id and the
// 30-minute cap as its deadline.
func testOpTaskDefaults(e *opEnv) {
	before := time.Now().Add(-time.Minute)
	a := e.createTask(store.BackgroundTask{SessionID: "sesn_ops", Command: "sleep 1"})
	b := e.createTask(store.BackgroundTask{SessionID: "sesn_ops", Command: "sleep 1"})
	if !strings.HasPrefix(a.ID, "bgt_") || a.ID == b.ID {
		e.t.Fatalf("generated ids %q and %q: want distinct bgt_ ids", a.ID, b.ID)
	}
	equal(e.t, "default Status", a.Status, "running")
	if a.ExitCode != nil || a.StartedAt.Before(before) {
		e.t.Fatalf("new task: ExitCode %v, StartedAt %v", a.ExitCode, a.StartedAt)
	}
	sbSameTime(e.t, "default Deadline", a.Deadline, a.StartedAt.Add(30*time.Minute))
	sbSameTime(e.t, "default UpdatedAt", a.UpdatedAt, a.StartedAt)
	opSameTask(e, "GetBackgroundTask", e.getTask(a.ID), a)

	c := e.createTask(store.BackgroundTask{SessionID: "sesn_ops", StartedAt: opAt(0)})
	sbSameTime(e.t, "Deadline from a given StartedAt", c.Deadline, opAt(30*time.Minute))
}

func testOpTaskCreateBad(e *opEnv) {
	e.createTask(opFullTask("bgt_dup"))
	dup := opFullTask("bgt_dup")
	dup.Command = "other"
	_, err := e.s.CreateBackgroundTask(e.ctx, &dup)
	mustErrIs(e.t, err, store.ErrAlreadyExists, "CreateBackgroundTask of an existing id")
	equal(e.t, "Command after a refused duplicate", e.getTask("bgt_dup").Command, "npm run dev")

	bad := opFullTask("bgt_bad")
	bad.Status = "sleeping"
	_, err = e.s.CreateBackgroundTask(e.ctx, &bad)
	mustErrIs(e.t, err, store.ErrInvalid, "CreateBackgroundTask with an unknown status")
	bad = opFullTask("bgt_bad")
	bad.SessionID = ""
	_, err = e.s.CreateBackgroundTask(e.ctx, &bad)
	mustErrIs(e.t, err, store.ErrInvalid, "CreateBackgroundTask without a session")
	_, err = e.s.GetBackgroundTask(e.ctx, "bgt_bad")
	mustErrIs(e.t, err, store.ErrNotFound, "GetBackgroundTask of a refused task")
}

func testOpTaskUpdate(e *opEnv) {
	created := e.createTask(store.BackgroundTask{ID: "bgt_u", SessionID: "sesn_ops", SandboxID: "sbx_1",
		ProcessID: "proc_1", Command: "make", StartedAt: opAt(0), UpdatedAt: opAt(0)})
	// Only status, exit code and updated_at change, whatever else is sent.
	in := *created
	in.Status, in.ExitCode = "exited", ptr(int64(2))
	in.Command, in.ProcessID, in.SandboxID, in.SessionID = "changed", "proc_9", "sbx_9", "sesn_9"
	in.StartedAt, in.Deadline = opAt(time.Hour), opAt(2*time.Hour)
	got, err := e.s.UpdateBackgroundTask(e.ctx, &in)
	mustOK(e.t, err, "UpdateBackgroundTask")
	if !got.UpdatedAt.After(created.UpdatedAt) {
		e.t.Fatalf("UpdatedAt = %v, want the store's now (after %v)", got.UpdatedAt, created.UpdatedAt)
	}
	want := *created
	want.Status, want.ExitCode, want.UpdatedAt = "exited", ptr(int64(2)), got.UpdatedAt
	opSameTask(e, "UpdateBackgroundTask", got, &want)
	opSameTask(e, "GetBackgroundTask after update", e.getTask("bgt_u"), &want)

	// Clearing the exit code is a write too.
	in = *got
	in.Status, in.ExitCode = "running", nil
	got, err = e.s.UpdateBackgroundTask(e.ctx, &in)
	mustOK(e.t, err, "UpdateBackgroundTask clearing ExitCode")
	if got.ExitCode != nil || e.getTask("bgt_u").ExitCode != nil {
		e.t.Fatalf("ExitCode = %v after clearing it", got.ExitCode)
	}

	_, err = e.s.UpdateBackgroundTask(e.ctx, &store.BackgroundTask{ID: "bgt_none", SessionID: "sesn_ops", Status: "killed"})
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateBackgroundTask of an unknown task")
	in.Status = "paused"
	_, err = e.s.UpdateBackgroundTask(e.ctx, &in)
	mustErrIs(e.t, err, store.ErrInvalid, "UpdateBackgroundTask with an unknown status")
	equal(e.t, "Status after a refused update", e.getTask("bgt_u").Status, "running")
}

func testOpTaskList(e *opEnv) {
	for _, t := range []store.BackgroundTask{
		{ID: "bgt_4", SessionID: "sesn_a", Status: "running", StartedAt: opAt(4 * time.Second)},
		{ID: "bgt_1", SessionID: "sesn_a", Status: "running", StartedAt: opAt(1 * time.Second)},
		{ID: "bgt_3", SessionID: "sesn_b", Status: "running", StartedAt: opAt(3 * time.Second)},
		{ID: "bgt_2", SessionID: "sesn_a", Status: "exited", StartedAt: opAt(2 * time.Second)},
		{ID: "bgt_5", SessionID: "sesn_b", Status: "expired", StartedAt: opAt(5 * time.Second)},
	} {
		e.createTask(t)
	}
	list := func(session, status string) []string {
		e.t.Helper()
		ts, err := e.s.ListBackgroundTasks(e.ctx, session, status)
		mustOK(e.t, err, "ListBackgroundTasks")
		out := []string{}
		for _, t := range ts {
			out = append(out, t.ID)
		}
		return out
	}
	sbEqualIDs(e.t, "all", list("", ""), "bgt_1", "bgt_2", "bgt_3", "bgt_4", "bgt_5")
	sbEqualIDs(e.t, "running", list("", "running"), "bgt_1", "bgt_3", "bgt_4")
	sbEqualIDs(e.t, "session a", list("sesn_a", ""), "bgt_1", "bgt_2", "bgt_4")
	sbEqualIDs(e.t, "session a running", list("sesn_a", "running"), "bgt_1", "bgt_4")
	sbEqualIDs(e.t, "session b killed", list("sesn_b", "killed"))
	sbEqualIDs(e.t, "unknown session", list("sesn_none", ""))
}
