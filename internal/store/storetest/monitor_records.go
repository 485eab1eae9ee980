package storetest

import (
	"bytes"
	"context"
	"encoding/json"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

var monRecordCases = []monCase{
	{"Transcripts", testMonTranscripts},
	{"TerminationOncePerSandbox", testMonTermination},
}

func testMonTranscripts(e *monEnv) {
	content := []byte("line 1\n\x00binary-safe\xff\n")
	first, err := e.s.SaveTranscript(e.ctx, &store.Transcript{TaskID: "tsk_1", SandboxID: "sbx_1", Source: "stdout",
		Content: content, Size: int64(len(content)), SHA256: "abc", SavedAt: monAt(time.Second)})
	mustOK(e.t, err, "SaveTranscript")
	if len(first.ID) < 5 || first.ID[:4] != "trn_" {
		e.t.Fatalf("generated id %q: want prefix trn_", first.ID)
	}
	got, err := e.s.GetTranscript(e.ctx, first.ID)
	mustOK(e.t, err, "GetTranscript")
	if !bytes.Equal(got.Content, content) {
		e.t.Fatalf("content %q, want %q", got.Content, content)
	}
	equal(e.t, "size", got.Size, int64(len(content)))
	equal(e.t, "sha", got.SHA256, "abc")
	equal(e.t, "source", got.Source, "stdout")
	monSameTime(e.t, "saved", got.SavedAt, monAt(time.Second))

	second, err := e.s.SaveTranscript(e.ctx, &store.Transcript{TaskID: "tsk_1", SandboxID: "sbx_1",
		Source: "file:/work/t.jsonl", BlobKey: "transcripts/tsk_1", Size: 1 << 20, SavedAt: monAt(2 * time.Second)})
	mustOK(e.t, err, "SaveTranscript blob")
	latest, err := e.s.LatestTranscript(e.ctx, store.LatestTranscriptParams{TaskID: "tsk_1"})
	mustOK(e.t, err, "LatestTranscript by task")
	equal(e.t, "latest by task", latest.ID, second.ID)
	equal(e.t, "blob key", latest.BlobKey, "transcripts/tsk_1")
	if len(latest.Content) != 0 {
		e.t.Fatalf("blob transcript has inline content %q", latest.Content)
	}
	latest, err = e.s.LatestTranscript(e.ctx, store.LatestTranscriptParams{SandboxID: "sbx_1"})
	mustOK(e.t, err, "LatestTranscript by sandbox")
	equal(e.t, "latest by sandbox", latest.ID, second.ID)
	_, err = e.s.LatestTranscript(e.ctx, store.LatestTranscriptParams{TaskID: "tsk_none"})
	mustErrIs(e.t, err, store.ErrNotFound, "LatestTranscript none")
	_, err = e.s.GetTranscript(e.ctx, "trn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetTranscript missing")
	_, err = e.s.SaveTranscript(e.ctx, &store.Transcript{Content: content})
	mustErrIs(e.t, err, store.ErrInvalid, "SaveTranscript without owner")
	_, err = e.s.SaveTranscript(e.ctx, &store.Transcript{ID: first.ID, TaskID: "tsk_1"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "SaveTranscript duplicate id")
}

func testMonTermination(e *monEnv) {
	e.appendEvents("sbx_1", monAt(0), hb(store.HeartbeatIdle, monAt(0)))
	_, err := e.s.GetTermination(e.ctx, "sbx_1")
	mustErrIs(e.t, err, store.ErrNotFound, "GetTermination before")
	rec, err := e.s.RecordTermination(e.ctx, &store.Termination{SandboxID: "sbx_1", TaskID: "tsk_1", TenantID: "tnt_a",
		Reason: store.TerminationIdle, Duration: 3*time.Minute + 250*time.Millisecond, Node: "node-a", At: monAt(time.Minute)})
	mustOK(e.t, err, "RecordTermination")
	equal(e.t, "duration", rec.Duration, 3*time.Minute+250*time.Millisecond)
	monSameTimePtr(e.t, "activity terminated", e.activity("sbx_1").TerminatedAt, ptr(monAt(time.Minute)))

	again, err := e.s.RecordTermination(e.ctx, &store.Termination{SandboxID: "sbx_1", Reason: store.TerminationHeartbeat,
		Node: "node-b", At: monAt(2 * time.Minute)})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "second RecordTermination")
	if again == nil {
		e.t.Fatal("second RecordTermination returned no stored termination")
	}
	equal(e.t, "stored node", again.Node, "node-a")
	equal(e.t, "stored reason", again.Reason, store.TerminationIdle)
	// Even an identical repeat is a second claim, not a success.
	_, err = e.s.RecordTermination(e.ctx, &store.Termination{SandboxID: "sbx_1", TaskID: "tsk_1", TenantID: "tnt_a",
		Reason: store.TerminationIdle, Duration: 3*time.Minute + 250*time.Millisecond, Node: "node-a", At: monAt(time.Minute)})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "identical RecordTermination")

	unfinished, err := e.s.ListUnfinishedTerminations(e.ctx, monAt(time.Minute))
	mustOK(e.t, err, "ListUnfinishedTerminations")
	if len(unfinished) != 1 || unfinished[0].SandboxID != "sbx_1" {
		e.t.Fatalf("unfinished terminations: %+v, want sbx_1's", unfinished)
	}
	if early, _ := e.s.ListUnfinishedTerminations(e.ctx, monAt(time.Minute-time.Second)); len(early) != 0 {
		e.t.Fatalf("unfinished terminations claimed before it: %+v", early)
	}
	fin, err := e.s.FinishTermination(e.ctx, store.FinishTerminationParams{SandboxID: "sbx_1", TranscriptID: "trn_1",
		StopError: "stop: timeout", At: monAt(3 * time.Minute),
		Audit: &store.AuditRecord{TenantID: "tnt_a", Kind: "SANDBOX_TERMINATED_IDLE", Subject: "sbx_1"}})
	mustOK(e.t, err, "FinishTermination")
	equal(e.t, "transcript", fin.TranscriptID, "trn_1")
	// A termination finishes, and is audited, once.
	_, err = e.s.FinishTermination(e.ctx, store.FinishTerminationParams{SandboxID: "sbx_1", TranscriptID: "trn_2",
		Audit: &store.AuditRecord{TenantID: "tnt_a", Kind: "SANDBOX_TERMINATED_IDLE", Subject: "sbx_1"}})
	mustErrIs(e.t, err, store.ErrConflict, "second FinishTermination")
	if a, ok := e.s.(interface {
		ListAudit(context.Context, store.ListAuditParams) ([]*store.AuditRecord, error)
	}); ok {
		audits, err := a.ListAudit(e.ctx, store.ListAuditParams{TenantID: "tnt_a", Subject: "sbx_1"})
		mustOK(e.t, err, "ListAudit")
		equal(e.t, "audit records of the termination", len(audits), 1)
	}
	if left, _ := e.s.ListUnfinishedTerminations(e.ctx, monAt(time.Hour)); len(left) != 0 {
		e.t.Fatalf("unfinished terminations after the finish: %+v", left)
	}
	got, err := e.s.GetTermination(e.ctx, "sbx_1")
	mustOK(e.t, err, "GetTermination")
	equal(e.t, "task", got.TaskID, "tsk_1")
	equal(e.t, "tenant", got.TenantID, "tnt_a")
	equal(e.t, "stop error", got.StopError, "stop: timeout")
	equal(e.t, "transcript read", got.TranscriptID, "trn_1")
	monSameTime(e.t, "at", got.At, monAt(time.Minute))
	monSameTimePtr(e.t, "finished", got.FinishedAt, ptr(monAt(3*time.Minute)))

	// A sandbox without events can be terminated too (dead before its
	// first heartbeat).
	silent, err := e.s.RecordTermination(e.ctx, &store.Termination{SandboxID: "sbx_silent", Reason: store.TerminationPostCompletion,
		Completed: true})
	mustOK(e.t, err, "RecordTermination without activity")
	equal(e.t, "completed", silent.Completed, true)
	_, err = e.s.RecordTermination(e.ctx, &store.Termination{SandboxID: "sbx_2", Reason: "bored"})
	mustErrIs(e.t, err, store.ErrInvalid, "RecordTermination bad reason")
	_, err = e.s.FinishTermination(e.ctx, store.FinishTerminationParams{SandboxID: "sbx_none"})
	mustErrIs(e.t, err, store.ErrNotFound, "FinishTermination unknown")
}

var monDiagnosticCases = []monCase{
	{"ClaimSafeguards", testMonDiagnosticSafeguards},
	{"ClaimCreatesTask", testMonDiagnosticTask},
	{"CloneReady", testMonCloneReady},
	{"OutcomeCountsOnce", testMonDiagnosticOutcome},
	{"HumanReview", testMonHumanReview},
	{"Validation", testMonDiagnosticInvalid},
}

var monRules = store.DiagnosticRules{MaxPerWorkflow: 3, Cooldown: 5 * time.Minute, MaxConsecutiveFailures: 2}

func (e *monEnv) claim(ticket string, at time.Time, rules store.DiagnosticRules) store.DiagnosticClaim {
	e.t.Helper()
	c, err := e.s.ClaimDiagnosticSpawn(e.ctx, store.ClaimDiagnosticParams{TicketID: ticket, Now: at, Rules: rules,
		Task: &store.Task{TenantID: "tnt_a", Command: json.RawMessage(`["diagnose"]`)}})
	mustOK(e.t, err, "ClaimDiagnosticSpawn")
	return c
}

func (e *monEnv) outcome(ticket, task string, success bool) *store.DiagnosticState {
	e.t.Helper()
	d, err := e.s.RecordDiagnosticOutcome(e.ctx, store.DiagnosticOutcomeParams{TicketID: ticket, TaskID: task, Success: success})
	mustOK(e.t, err, "RecordDiagnosticOutcome")
	return d
}

func refused(e *monEnv, what string, c store.DiagnosticClaim, want store.DiagnosticRefusal) {
	e.t.Helper()
	if c.OK || c.Task != nil {
		e.t.Fatalf("%s: claim succeeded (task %v), want refusal %s", what, c.Task, want)
	}
	equal(e.t, what+": refusal", c.Refusal, want)
}

// testMonDiagnosticSafeguards walks the seed's safeguards in order: a
// pending diagnostic, the cooldown, consecutive failures, the per-workflow
// cap; every refusal writes nothing.
func testMonDiagnosticSafeguards(e *monEnv) {
	tk := e.ticket("tnt_a")
	c1 := e.claim(tk.ID, monAt(0), monRules)
	equal(e.t, "first claim", c1.OK, true)
	equal(e.t, "attempts", c1.State.Attempts, int64(1))
	equal(e.t, "pending", c1.State.PendingTaskID, c1.Task.ID)
	monSameTimePtr(e.t, "spawned at", c1.State.LastSpawnedAt, ptr(monAt(0)))

	refused(e, "while pending, even after the cooldown", e.claim(tk.ID, monAt(time.Hour), monRules), store.RefusedPending)
	e.outcome(tk.ID, c1.Task.ID, false)

	c := e.claim(tk.ID, monAt(4*time.Minute), monRules)
	refused(e, "within the cooldown", c, store.RefusedCooldown)
	monSameTimePtr(e.t, "retry at", c.RetryAt, ptr(monAt(5*time.Minute)))
	equal(e.t, "refusal writes nothing", c.State.Attempts, int64(1))

	c2 := e.claim(tk.ID, monAt(5*time.Minute), monRules)
	equal(e.t, "claim exactly at the cooldown's end", c2.OK, true)
	d := e.outcome(tk.ID, c2.Task.ID, false)
	equal(e.t, "consecutive failures", d.ConsecutiveFailures, int64(2))
	refused(e, "after max consecutive failures", e.claim(tk.ID, monAt(time.Hour), monRules), store.RefusedConsecutiveFailures)

	// A success resets consecutive failures but not the per-workflow cap.
	loose := monRules
	loose.MaxConsecutiveFailures = 10
	c3 := e.claim(tk.ID, monAt(time.Hour), loose)
	equal(e.t, "third claim", c3.OK, true)
	d = e.outcome(tk.ID, c3.Task.ID, true)
	equal(e.t, "failures reset", d.ConsecutiveFailures, int64(0))
	equal(e.t, "completed", d.Completed, int64(1))
	refused(e, "at max per workflow", e.claim(tk.ID, monAt(2*time.Hour), monRules), store.RefusedMaxPerWorkflow)

	state, err := e.s.GetDiagnosticState(e.ctx, tk.ID)
	mustOK(e.t, err, "GetDiagnosticState")
	equal(e.t, "attempts", state.Attempts, int64(3))
	equal(e.t, "pending cleared", state.PendingTaskID, "")
	monSameTimePtr(e.t, "last spawned", state.LastSpawnedAt, ptr(monAt(time.Hour)))
	_, err = e.s.ClaimDiagnosticSpawn(e.ctx, store.ClaimDiagnosticParams{TicketID: "tkt_missing", Now: monAt(0), Rules: monRules,
		Task: &store.Task{Command: json.RawMessage(`["diagnose"]`)}})
	mustErrIs(e.t, err, store.ErrNotFound, "ClaimDiagnosticSpawn unknown ticket")
	_, err = e.s.GetDiagnosticState(e.ctx, "tkt_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetDiagnosticState unknown ticket")
}

// testMonCloneReady: the clone_ready safeguard holds only once the
// sandbox to clone has a finished termination that stopped it; it comes
// after the per-workflow cap and before the cooldown, as in the seed.
func testMonCloneReady(e *monEnv) {
	tk := e.ticket("tnt_a")
	claim := func(at time.Time, from string) store.DiagnosticClaim {
		e.t.Helper()
		c, err := e.s.ClaimDiagnosticSpawn(e.ctx, store.ClaimDiagnosticParams{TicketID: tk.ID, Now: at, Rules: monRules,
			CloneFrom: from, Task: &store.Task{TenantID: "tnt_a", Command: json.RawMessage(`["diagnose"]`)}})
		mustOK(e.t, err, "ClaimDiagnosticSpawn")
		return c
	}
	c := claim(monAt(0), "sbx_clone_none")
	refused(e, "no termination of the sandbox to clone", c, store.RefusedCloneNotReady)
	equal(e.t, "a refusal writes nothing", c.State.Attempts, int64(0))

	_, err := e.s.RecordTermination(e.ctx, &store.Termination{SandboxID: "sbx_clone", TenantID: "tnt_a", Reason: store.TerminationIdle, At: monAt(0)})
	mustOK(e.t, err, "RecordTermination")
	refused(e, "termination claimed, not finished", claim(monAt(0), "sbx_clone"), store.RefusedCloneNotReady)

	_, err = e.s.RecordTermination(e.ctx, &store.Termination{SandboxID: "sbx_clone_bad", TenantID: "tnt_a", Reason: store.TerminationIdle, At: monAt(0)})
	mustOK(e.t, err, "RecordTermination")
	_, err = e.s.FinishTermination(e.ctx, store.FinishTerminationParams{SandboxID: "sbx_clone_bad", StopError: "stop: timeout", At: monAt(0)})
	mustOK(e.t, err, "FinishTermination with a stop error")
	refused(e, "termination whose stop failed", claim(monAt(0), "sbx_clone_bad"), store.RefusedCloneNotReady)

	_, err = e.s.FinishTermination(e.ctx, store.FinishTerminationParams{SandboxID: "sbx_clone", At: monAt(0)})
	mustOK(e.t, err, "FinishTermination")
	c = claim(monAt(0), "sbx_clone")
	equal(e.t, "claim once the termination finished", c.OK, true)
	e.outcome(tk.ID, c.Task.ID, false)
	// Order: the cooldown is checked after clone_ready.
	refused(e, "within the cooldown, clone not ready", claim(monAt(time.Minute), "sbx_clone_none"), store.RefusedCloneNotReady)
	refused(e, "within the cooldown, clone ready", claim(monAt(time.Minute), "sbx_clone"), store.RefusedCooldown)
	equal(e.t, "no clone needed", claim(monAt(time.Hour), "").OK, true)
}

func testMonDiagnosticTask(e *monEnv) {
	tk := e.ticket("tnt_a")
	c, err := e.s.ClaimDiagnosticSpawn(e.ctx, store.ClaimDiagnosticParams{TicketID: tk.ID, Now: monAt(0), Rules: monRules,
		Task: &store.Task{ID: "tsk_diag", TicketID: "tkt_other", Kind: store.TaskAgent, Status: store.TaskRunning,
			Command: json.RawMessage(`["diagnose","--ticket"]`), DiagnosticOf: "tsk_failed"}})
	mustOK(e.t, err, "ClaimDiagnosticSpawn")
	equal(e.t, "ok", c.OK, true)
	got, err := e.s.GetTask(e.ctx, "tsk_diag")
	mustOK(e.t, err, "GetTask diagnostic")
	equal(e.t, "kind forced", got.Kind, store.TaskDiagnostic)
	equal(e.t, "ticket forced", got.TicketID, tk.ID)
	equal(e.t, "status forced", got.Status, store.TaskPending)
	equal(e.t, "diagnostic_of", got.DiagnosticOf, "tsk_failed")

	// A task that cannot be created rolls the claim back with it.
	tk2 := e.ticket("tnt_a")
	_, err = e.s.ClaimDiagnosticSpawn(e.ctx, store.ClaimDiagnosticParams{TicketID: tk2.ID, Now: monAt(0), Rules: monRules,
		Task: &store.Task{ID: "tsk_diag", Command: json.RawMessage(`["diagnose"]`)}})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "claim whose task id is taken")
	state, err := e.s.GetDiagnosticState(e.ctx, tk2.ID)
	mustOK(e.t, err, "GetDiagnosticState")
	equal(e.t, "attempts after rolled-back claim", state.Attempts, int64(0))
	equal(e.t, "pending after rolled-back claim", state.PendingTaskID, "")
}

func testMonDiagnosticOutcome(e *monEnv) {
	tk := e.ticket("tnt_a")
	c := e.claim(tk.ID, monAt(0), monRules)
	_, err := e.s.RecordDiagnosticOutcome(e.ctx, store.DiagnosticOutcomeParams{TicketID: tk.ID, TaskID: "tsk_other"})
	mustErrIs(e.t, err, store.ErrConflict, "outcome of a task that is not pending")
	d := e.outcome(tk.ID, c.Task.ID, false)
	equal(e.t, "failures", d.ConsecutiveFailures, int64(1))
	_, err = e.s.RecordDiagnosticOutcome(e.ctx, store.DiagnosticOutcomeParams{TicketID: tk.ID, TaskID: c.Task.ID})
	mustErrIs(e.t, err, store.ErrConflict, "outcome recorded twice")
	state, err := e.s.GetDiagnosticState(e.ctx, tk.ID)
	mustOK(e.t, err, "GetDiagnosticState")
	equal(e.t, "failures counted once", state.ConsecutiveFailures, int64(1))
	_, err = e.s.RecordDiagnosticOutcome(e.ctx, store.DiagnosticOutcomeParams{TicketID: "tkt_missing", TaskID: "tsk_x"})
	mustErrIs(e.t, err, store.ErrNotFound, "outcome of unknown ticket")
}

func testMonHumanReview(e *monEnv) {
	tk := e.ticket("tnt_a")
	d, err := e.s.MarkHumanReview(e.ctx, store.MarkHumanReviewParams{TicketID: tk.ID,
		Reason: "completed diagnostics and failed originals", At: monAt(time.Minute)})
	mustOK(e.t, err, "MarkHumanReview")
	equal(e.t, "flag", d.HumanReview, true)
	d, err = e.s.MarkHumanReview(e.ctx, store.MarkHumanReviewParams{TicketID: tk.ID, Reason: "later", At: monAt(time.Hour)})
	mustOK(e.t, err, "MarkHumanReview again")
	equal(e.t, "first reason kept", d.HumanReviewReason, "completed diagnostics and failed originals")
	monSameTimePtr(e.t, "first time kept", d.HumanReviewAt, ptr(monAt(time.Minute)))
	refused(e, "under human review", e.claim(tk.ID, monAt(time.Hour), monRules), store.RefusedHumanReview)
	_, err = e.s.MarkHumanReview(e.ctx, store.MarkHumanReviewParams{TicketID: "tkt_missing"})
	mustErrIs(e.t, err, store.ErrNotFound, "MarkHumanReview unknown ticket")
}

func testMonDiagnosticInvalid(e *monEnv) {
	tk := e.ticket("tnt_a")
	task := &store.Task{Command: json.RawMessage(`["diagnose"]`)}
	for what, p := range map[string]store.ClaimDiagnosticParams{
		"no cap per workflow":  {TicketID: tk.ID, Now: monAt(0), Task: task, Rules: store.DiagnosticRules{MaxConsecutiveFailures: 1}},
		"no failure cap":       {TicketID: tk.ID, Now: monAt(0), Task: task, Rules: store.DiagnosticRules{MaxPerWorkflow: 1}},
		"negative cooldown":    {TicketID: tk.ID, Now: monAt(0), Task: task, Rules: store.DiagnosticRules{MaxPerWorkflow: 1, MaxConsecutiveFailures: 1, Cooldown: -1}},
		"no task":              {TicketID: tk.ID, Now: monAt(0), Rules: monRules},
		"no now":               {TicketID: tk.ID, Task: task, Rules: monRules},
		"task without command": {TicketID: tk.ID, Now: monAt(0), Rules: monRules, Task: &store.Task{}},
	} {
		_, err := e.s.ClaimDiagnosticSpawn(e.ctx, p)
		mustErrIs(e.t, err, store.ErrInvalid, "ClaimDiagnosticSpawn "+what)
	}
	state, err := e.s.GetDiagnosticState(e.ctx, tk.ID)
	mustOK(e.t, err, "GetDiagnosticState")
	equal(e.t, "attempts after invalid claims", state.Attempts, int64(0))
}
