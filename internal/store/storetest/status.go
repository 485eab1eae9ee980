package storetest

import (
	"github.com/agentkernel/agentkernel/internal/store"
)

var statusCases = []testCase{
	{"UpdateStatus", testUpdateStatus},
	{"CompareAndSetStatus", testCompareAndSetStatus},
	{"Increments", testIncrements},
	{"InterruptFlag", testInterruptFlag},
}

func testUpdateStatus(e *env) {
	s0 := e.session()
	v, err := e.s.UpdateStatus(e.ctx, store.UpdateStatusParams{SessionID: s0.ID, Status: store.StatusFailed,
		Error: ptr("model refused"), InterruptContext: []byte(`{"why":"x"}`)})
	mustOK(e.t, err, "UpdateStatus")
	equal(e.t, "UpdateStatus bumps the version by one", v, s0.Version+1)
	got := e.get(s0.ID)
	equal(e.t, "Status", got.Status, store.StatusFailed)
	equal(e.t, "Error", got.Error, "model refused")
	equal(e.t, "Version", got.Version, v)
	jsonEq(e.t, "InterruptContext", got.InterruptContext, `{"why":"x"}`)

	// No CAS: any status may follow any other; a nil Error leaves it alone.
	v2, err := e.s.UpdateStatus(e.ctx, store.UpdateStatusParams{SessionID: s0.ID, Status: store.StatusActive})
	mustOK(e.t, err, "UpdateStatus back to active")
	equal(e.t, "version", v2, v+1)
	got = e.get(s0.ID)
	equal(e.t, "Status", got.Status, store.StatusActive)
	equal(e.t, "Error kept when nil", got.Error, "model refused")

	_, err = e.s.UpdateStatus(e.ctx, store.UpdateStatusParams{SessionID: s0.ID, Status: "bogus"})
	mustErrIs(e.t, err, store.ErrInvalid, "UpdateStatus with unknown status")
	_, err = e.s.UpdateStatus(e.ctx, store.UpdateStatusParams{SessionID: "sesn_missing", Status: store.StatusActive})
	mustErrIs(e.t, err, store.ErrNotFound, "UpdateStatus(unknown)")
}

func testCompareAndSetStatus(e *env) {
	s0 := e.session()
	res, err := e.s.CompareAndSetStatus(e.ctx, store.CompareAndSetStatusParams{SessionID: s0.ID,
		Expected: []store.SessionStatus{store.StatusPaused, store.StatusActive}, New: store.StatusInterrupted,
		ExpectedVersion: ptr(s0.Version), Error: ptr("stopped"), InterruptContext: []byte(`{"by":"user"}`)})
	mustOK(e.t, err, "CAS")
	if !res.OK {
		e.t.Fatalf("CAS with matching status and version failed: %+v", res)
	}
	equal(e.t, "NewVersion", res.NewVersion, s0.Version+1)
	got := e.get(s0.ID)
	equal(e.t, "Status", got.Status, store.StatusInterrupted)
	equal(e.t, "Version", got.Version, res.NewVersion)
	equal(e.t, "Error", got.Error, "stopped")
	jsonEq(e.t, "InterruptContext", got.InterruptContext, `{"by":"user"}`)

	// Status mismatch: not an error, nothing written, current values reported.
	res, err = e.s.CompareAndSetStatus(e.ctx, store.CompareAndSetStatusParams{SessionID: s0.ID,
		Expected: []store.SessionStatus{store.StatusActive}, New: store.StatusCompleted})
	mustOK(e.t, err, "CAS status mismatch")
	if res.OK || res.CurrentStatus != store.StatusInterrupted || res.CurrentVersion != got.Version {
		e.t.Fatalf("CAS status mismatch: got %+v, want not OK, interrupted, version %d", res, got.Version)
	}
	// Version mismatch with a matching status.
	res, err = e.s.CompareAndSetStatus(e.ctx, store.CompareAndSetStatusParams{SessionID: s0.ID,
		Expected: []store.SessionStatus{store.StatusInterrupted}, New: store.StatusActive, ExpectedVersion: ptr(s0.Version)})
	mustOK(e.t, err, "CAS version mismatch")
	if res.OK || res.CurrentVersion != got.Version || res.CurrentStatus != store.StatusInterrupted {
		e.t.Fatalf("CAS version mismatch: got %+v", res)
	}
	after := e.get(s0.ID)
	equal(e.t, "status after failed CAS", after.Status, store.StatusInterrupted)
	equal(e.t, "version after failed CAS", after.Version, got.Version)

	// Without ExpectedVersion only the status is compared.
	res, err = e.s.CompareAndSetStatus(e.ctx, store.CompareAndSetStatusParams{SessionID: s0.ID,
		Expected: []store.SessionStatus{store.StatusInterrupted}, New: store.StatusActive})
	mustOK(e.t, err, "CAS without version")
	if !res.OK || res.NewVersion != got.Version+1 {
		e.t.Fatalf("CAS without version: got %+v", res)
	}

	_, err = e.s.CompareAndSetStatus(e.ctx, store.CompareAndSetStatusParams{SessionID: "sesn_missing",
		Expected: []store.SessionStatus{store.StatusActive}, New: store.StatusPaused})
	mustErrIs(e.t, err, store.ErrNotFound, "CAS(unknown)")
	_, err = e.s.CompareAndSetStatus(e.ctx, store.CompareAndSetStatusParams{SessionID: s0.ID,
		Expected: []store.SessionStatus{store.StatusActive}, New: "nope"})
	mustErrIs(e.t, err, store.ErrInvalid, "CAS to unknown status")
}

func testIncrements(e *env) {
	s0 := e.session()
	n, err := e.s.IncrementStepCount(e.ctx, s0.ID)
	mustOK(e.t, err, "IncrementStepCount")
	equal(e.t, "step count", n, 1)
	n, err = e.s.IncrementResumeCount(e.ctx, s0.ID)
	mustOK(e.t, err, "IncrementResumeCount")
	equal(e.t, "resume count", n, 1)
	got := e.get(s0.ID)
	equal(e.t, "StepCount", got.StepCount, 1)
	equal(e.t, "ResumeCount", got.ResumeCount, 1)
	equal(e.t, "two increments bump the version twice", got.Version, s0.Version+2)

	_, err = e.s.IncrementStepCount(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "IncrementStepCount(unknown)")
	_, err = e.s.IncrementResumeCount(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "IncrementResumeCount(unknown)")
}

func testInterruptFlag(e *env) {
	s0 := e.session()
	f, err := e.s.CheckInterruptFlag(e.ctx, s0.ID)
	mustOK(e.t, err, "CheckInterruptFlag(unset)")
	equal(e.t, "unset flag", f.Set, false)

	mustOK(e.t, e.s.SetInterruptFlag(e.ctx, s0.ID, "user pressed stop"), "SetInterruptFlag")
	f, err = e.s.CheckInterruptFlag(e.ctx, s0.ID)
	mustOK(e.t, err, "CheckInterruptFlag")
	if !f.Set || f.Reason != "user pressed stop" || f.SetAt == nil {
		e.t.Fatalf("CheckInterruptFlag after set: got %+v", f)
	}
	f, err = e.s.CheckInterruptFlag(e.ctx, s0.ID)
	mustOK(e.t, err, "CheckInterruptFlag again")
	equal(e.t, "check clears the flag", f.Set, false)

	mustOK(e.t, e.s.SetInterruptFlag(e.ctx, s0.ID, "again"), "SetInterruptFlag")
	mustOK(e.t, e.s.ClearInterruptFlag(e.ctx, s0.ID), "ClearInterruptFlag")
	f, err = e.s.CheckInterruptFlag(e.ctx, s0.ID)
	mustOK(e.t, err, "CheckInterruptFlag after clear")
	equal(e.t, "cleared flag", f.Set, false)

	// The flag is a side channel: it never invalidates an expectedVersion.
	equal(e.t, "flag operations leave the version", e.get(s0.ID).Version, s0.Version)

	mustErrIs(e.t, e.s.SetInterruptFlag(e.ctx, "sesn_missing", "x"), store.ErrNotFound, "SetInterruptFlag(unknown)")
	_, err = e.s.CheckInterruptFlag(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "CheckInterruptFlag(unknown)")
	mustErrIs(e.t, e.s.ClearInterruptFlag(e.ctx, "sesn_missing"), store.ErrNotFound, "ClearInterruptFlag(unknown)")
}
