package storetest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// The one session model (issue 13): a Managed Agents session is a seed-004
// session whose events are its messages, whose turns are runs and whose
// step boundaries are checkpoints naming a workspace snapshot.
var mgBranchCases = []mgCase{
	{"CreateWithEventsIsAtomic", testBrCreateWithEvents},
	{"EventsAreMessages", testBrEventsAreMessages},
	{"CommitStep", testBrCommitStep},
	{"EndTurn", testBrEndTurn},
	{"AbandonedRunKeepsItsRecord", testBrDeleteRunRowKeepsRecord},
	{"Fork", testBrFork},
	{"ForkBadPaths", testBrForkBadPaths},
	{"Rewind", testBrRewind},
	{"RewindBadPaths", testBrRewindBadPaths},
	{"WorkspaceSnapshots", testBrWorkspaceSnapshots},
	{"InterruptEventSetsTheFlag", testBrInterruptFlag},
}

const brOwner = "node-a/boot_1"

// brTurn starts a turn on s: a user message, status_running and the run row.
func (e *mgEnv) brTurn(sessionID string) *store.RunRow {
	e.t.Helper()
	evs := e.appendTypes(sessionID, "user.message", "session.status_running")
	return e.runRow(store.RunRow{SessionID: sessionID, TurnSeq: evs[0].Seq, Owner: brOwner, LeaseExpiresAt: sbAt(time.Hour)})
}

func brEvents(types ...string) []store.NewEvent {
	out := make([]store.NewEvent, len(types))
	for i, t := range types {
		out[i] = store.NewEvent{Type: t, Data: json.RawMessage(fmt.Sprintf(`{"type":%q}`, t))}
	}
	return out
}

func (e *mgEnv) brIDs(sessionID string) []string {
	e.t.Helper()
	out := []string{}
	for _, ev := range e.events(store.ListEventsParams{SessionID: sessionID}) {
		out = append(out, ev.ID)
	}
	return out
}

func testBrCreateWithEvents(e *mgEnv) {
	res := func(sid, path string) *store.SessionResource {
		return &store.SessionResource{TenantID: mgTenant, SessionID: sid, Kind: "file", MountPath: path, Doc: json.RawMessage(`{}`)}
	}
	s, evs, rs, err := e.s.CreateManagedSessionWith(e.ctx, store.NewManagedSession{
		Session:   store.ManagedSession{ID: "sesn_c", TenantID: mgTenant},
		Resources: []*store.SessionResource{res("sesn_c", "/mnt/a")},
		Events:    brEvents("session.status_idle", "user.message")})
	mustOK(e.t, err, "CreateManagedSessionWith")
	equal(e.t, "Version", s.Version, int64(1))
	mgEqualSeqs(e.t, "returned events", evs, 1, 2)
	mgEqualSeqs(e.t, "stored events", e.events(store.ListEventsParams{SessionID: s.ID}), 1, 2)
	equal(e.t, "returned resources", len(rs), 1)
	listed, err := e.s.ListSessionResources(e.ctx, s.ID, "", 0)
	mustOK(e.t, err, "ListSessionResources")
	equal(e.t, "stored resources", len(listed), 1)

	_, _, _, err = e.s.CreateManagedSessionWith(e.ctx, store.NewManagedSession{
		Session: store.ManagedSession{ID: "sesn_c", TenantID: mgTenant}, Events: brEvents("user.message")})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "create of a taken id")
	equal(e.t, "events after the refused create", e.lastSeq("sesn_c"), int64(2))

	_, _, _, err = e.s.CreateManagedSessionWith(e.ctx, store.NewManagedSession{
		Session: store.ManagedSession{ID: "sesn_bad", TenantID: mgTenant},
		Events:  []store.NewEvent{{Type: "user.message"}, {Type: ""}}})
	mustErrIs(e.t, err, store.ErrInvalid, "create with an event without a type")
	_, err = e.s.GetManagedSession(e.ctx, "sesn_bad")
	mustErrIs(e.t, err, store.ErrNotFound, "the session of a refused create")

	// A resource that cannot be stored leaves no session and no events.
	_, _, _, err = e.s.CreateManagedSessionWith(e.ctx, store.NewManagedSession{
		Session:   store.ManagedSession{ID: "sesn_half", TenantID: mgTenant},
		Resources: []*store.SessionResource{res("sesn_half", "/mnt/a"), res("sesn_half", "/mnt/a")},
		Events:    brEvents("user.message")})
	mustErrIs(e.t, err, store.ErrConflict, "create with two resources at one mount path")
	_, err = e.s.GetManagedSession(e.ctx, "sesn_half")
	mustErrIs(e.t, err, store.ErrNotFound, "the session of a create whose resources failed")
}

// testBrEventsAreMessages: the event log and the seed-004 message log are
// one log.
func testBrEventsAreMessages(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_m"})
	evs := e.appendTypes(s.ID, "user.message", "agent.message")
	msgs, err := e.s.GetMessages(e.ctx, store.GetMessagesParams{SessionID: s.ID})
	mustOK(e.t, err, "GetMessages")
	equal(e.t, "messages", len(msgs), 2)
	for i, m := range msgs {
		equal(e.t, "message Seq", m.Seq, evs[i].Seq)
		equal(e.t, "message role", m.Role, evs[i].Type)
		equal(e.t, "message content", string(m.Content), string(evs[i].Data))
	}
	n, err := e.s.CountMessages(e.ctx, s.ID)
	mustOK(e.t, err, "CountMessages")
	equal(e.t, "CountMessages", n, int64(2))
	seed, err := e.s.GetSession(e.ctx, s.ID)
	mustOK(e.t, err, "GetSession of a Managed Agents session")
	equal(e.t, "seed-004 version", seed.Version, e.getSession(s.ID).Version)
}

func testBrCommitStep(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_step"})
	_, _, err := e.s.CommitStep(e.ctx, store.StepCommit{SessionID: s.ID, Owner: brOwner, Events: brEvents("agent.tool_result")})
	mustErrIs(e.t, err, store.ErrNotFound, "CommitStep with no turn running")
	run := e.brTurn(s.ID)
	_, _, err = e.s.CommitStep(e.ctx, store.StepCommit{SessionID: s.ID, Owner: "node-b/boot", Events: brEvents("agent.tool_result")})
	mustErrIs(e.t, err, store.ErrConflict, "CommitStep by another owner")
	equal(e.t, "events after refused steps", e.lastSeq(s.ID), int64(2))

	evs, cp, err := e.s.CommitStep(e.ctx, store.StepCommit{SessionID: s.ID, Owner: brOwner, Step: 1,
		Events: brEvents("agent.tool_use", "agent.tool_result"), Workspace: "wsnap_1"})
	mustOK(e.t, err, "CommitStep")
	mgEqualSeqs(e.t, "step events", evs, 3, 4)
	equal(e.t, "checkpoint MessageCount", cp.MessageCount, int64(4))
	equal(e.t, "checkpoint Workspace", cp.Workspace, "wsnap_1")
	equal(e.t, "checkpoint RunID", cp.RunID, run.RunID)
	equal(e.t, "checkpoint StepCount", cp.StepCount, int64(1))
	equal(e.t, "checkpoint Source", cp.Source, store.CheckpointSourceStep)
	latest, err := e.s.GetLatestCheckpoint(e.ctx, s.ID)
	mustOK(e.t, err, "GetLatestCheckpoint")
	equal(e.t, "pointer", latest.ID, cp.ID)
	equal(e.t, "pointer Workspace", latest.Workspace, "wsnap_1")
}

func testBrEndTurn(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_end", Usage: json.RawMessage(`{"input_tokens":1}`)})
	run := e.brTurn(s.ID)
	_, _, err := e.s.EndTurn(e.ctx, store.EndTurn{SessionID: s.ID, Owner: brOwner, Status: store.RunRunning})
	mustErrIs(e.t, err, store.ErrInvalid, "EndTurn to status running")
	_, _, err = e.s.EndTurn(e.ctx, store.EndTurn{SessionID: s.ID, Owner: "node-b/boot", Status: store.RunCompleted})
	mustErrIs(e.t, err, store.ErrConflict, "EndTurn by another owner")

	evs, cp, err := e.s.EndTurn(e.ctx, store.EndTurn{SessionID: s.ID, Owner: brOwner, Status: store.RunCompleted,
		StopReason: json.RawMessage(`{"type":"end_turn"}`), ProcessedSeq: 2, Step: 3,
		Usage: json.RawMessage(`{"input_tokens":5}`), SessionUsage: json.RawMessage(`{"input_tokens":6}`),
		Events: brEvents("agent.message", "session.status_idle"), Workspace: "wsnap_end"})
	mustOK(e.t, err, "EndTurn")
	mgEqualSeqs(e.t, "closing events", evs, 3, 4)
	equal(e.t, "checkpoint MessageCount", cp.MessageCount, int64(4))
	_, err = e.s.GetRunRow(e.ctx, s.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "the run row after EndTurn")
	got := e.getSession(s.ID)
	equal(e.t, "StopReason", string(got.StopReason), `{"type":"end_turn"}`)
	equal(e.t, "ProcessedSeq", got.ProcessedSeq, int64(2))
	equal(e.t, "Usage", string(got.Usage), `{"input_tokens":6}`)
	runs, err := e.s.ListRuns(e.ctx, s.ID)
	mustOK(e.t, err, "ListRuns")
	equal(e.t, "runs", len(runs), 1)
	r := runs[0]
	equal(e.t, "run id", r.ID, run.RunID)
	equal(e.t, "run status", r.Status, store.RunCompleted)
	equal(e.t, "run usage", string(r.Usage), `{"input_tokens":5}`)
	equal(e.t, "run checkpoint", r.CheckpointID, cp.ID)
	if r.CompletedAt == nil {
		e.t.Fatal("the ended run has no CompletedAt")
	}
	want := float64(r.CompletedAt.Sub(r.CreatedAt).Microseconds()) / 1e6
	equal(e.t, "ActiveSeconds = the turn's duration", got.ActiveSeconds, want)
	// ProcessedSeq never moves back; a nil SessionUsage keeps the usage.
	e.brTurn(s.ID)
	_, _, err = e.s.EndTurn(e.ctx, store.EndTurn{SessionID: s.ID, Owner: brOwner, Status: store.RunInterrupted, ProcessedSeq: 1})
	mustOK(e.t, err, "second EndTurn")
	got = e.getSession(s.ID)
	equal(e.t, "ProcessedSeq after a lower one", got.ProcessedSeq, int64(2))
	equal(e.t, "Usage kept", string(got.Usage), `{"input_tokens":6}`)
	runs, _ = e.s.ListRuns(e.ctx, s.ID)
	equal(e.t, "runs after two turns", len(runs), 2)
	equal(e.t, "second run status", runs[1].Status, store.RunInterrupted)
}

func testBrDeleteRunRowKeepsRecord(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_gone"})
	e.brTurn(s.ID)
	mustOK(e.t, e.s.DeleteRunRow(e.ctx, s.ID, brOwner), "DeleteRunRow")
	runs, err := e.s.ListRuns(e.ctx, s.ID)
	mustOK(e.t, err, "ListRuns")
	equal(e.t, "runs", len(runs), 1)
	equal(e.t, "status of the run whose row was deleted", runs[0].Status, store.RunFailed)
	e.brTurn(s.ID) // the turn lock is free again
}

func testBrFork(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_src", AgentID: "agent_1", AgentVersion: 2, EnvironmentID: "env_1",
		Doc: json.RawMessage(`{"title":"src"}`)})
	e.brTurn(s.ID)
	_, cp1, err := e.s.CommitStep(e.ctx, store.StepCommit{SessionID: s.ID, Owner: brOwner, Step: 1,
		Events: brEvents("agent.tool_use", "agent.tool_result"), Workspace: "wsnap_a"})
	mustOK(e.t, err, "CommitStep 1")
	_, _, err = e.s.EndTurn(e.ctx, store.EndTurn{SessionID: s.ID, Owner: brOwner, Status: store.RunCompleted,
		ProcessedSeq: 1, Events: brEvents("session.status_idle"), Workspace: "wsnap_b"})
	mustOK(e.t, err, "EndTurn")
	srcIDs := e.brIDs(s.ID)

	f, err := e.s.ForkManagedSession(e.ctx, store.ForkParams{FromID: s.ID, NewID: "sesn_fork", AtSeq: cp1.MessageCount,
		Append: brEvents("session.status_idle"), Workspace: cp1.Workspace, ProcessedSeq: 2,
		Resources: []*store.SessionResource{{TenantID: mgTenant, SessionID: "sesn_fork", Kind: "file", MountPath: "/mnt/a", Doc: json.RawMessage(`{}`)}}})
	mustOK(e.t, err, "ForkManagedSession")
	equal(e.t, "fork tenant", f.TenantID, mgTenant)
	equal(e.t, "fork agent", f.AgentID+fmt.Sprint(f.AgentVersion), "agent_12")
	equal(e.t, "fork environment", f.EnvironmentID, "env_1")
	equal(e.t, "fork doc", string(f.Doc), `{"title":"src"}`)
	equal(e.t, "fork ForkedFrom", f.Lineage.ForkedFrom, s.ID)
	equal(e.t, "fork ForkedAtSeq", f.Lineage.ForkedAtSeq, int64(4))
	equal(e.t, "fork WorkspaceSeed", f.Lineage.WorkspaceSeed, "wsnap_a")
	equal(e.t, "fork ProcessedSeq", f.ProcessedSeq, int64(2))
	equal(e.t, "fork SandboxID", f.SandboxID, "")
	equal(e.t, "fork Usage", len(f.Usage), 0)
	forkIDs := e.brIDs(f.ID)
	equal(e.t, "fork events", len(forkIDs), 5)
	for i := range 4 {
		equal(e.t, fmt.Sprintf("fork event %d id", i+1), forkIDs[i], srcIDs[i])
	}
	cps, err := e.s.ListCheckpoints(e.ctx, f.ID)
	mustOK(e.t, err, "ListCheckpoints of the fork")
	if len(cps) != 2 || cps[0].Workspace != "wsnap_a" || cps[1].Workspace != "wsnap_a" || cps[1].MessageCount != 5 {
		e.t.Fatalf("fork checkpoints: %+v, want the source's at 4 and the fork's start at 5, both wsnap_a", cps)
	}
	latest, err := e.s.GetLatestCheckpoint(e.ctx, f.ID)
	mustOK(e.t, err, "GetLatestCheckpoint of the fork")
	equal(e.t, "fork pointer", latest.ID, cps[1].ID)
	rs, err := e.s.ListSessionResources(e.ctx, f.ID, "", 0)
	mustOK(e.t, err, "ListSessionResources of the fork")
	equal(e.t, "fork resources", len(rs), 1)
	// The source is untouched; both go on independently.
	mgEqualIDs(e.t, "source events after the fork", e.brIDs(s.ID), srcIDs...)
	e.appendTypes(f.ID, "user.message")
	equal(e.t, "source after an append to the fork", e.lastSeq(s.ID), int64(len(srcIDs)))
	listed, err := e.s.ListManagedSessions(e.ctx, store.ListResourcesParams{TenantID: mgTenant})
	mgEqualIDs(e.t, "sessions listed", mgIDs(e.t, "ListManagedSessions", listed, err,
		func(m *store.ManagedSession) string { return m.ID }), "sesn_fork", "sesn_src")
}

func testBrForkBadPaths(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_src"})
	e.appendTypes(s.ID, "user.message")
	for _, at := range []int64{0, 2, -1} {
		_, err := e.s.ForkManagedSession(e.ctx, store.ForkParams{FromID: s.ID, AtSeq: at})
		mustErrIs(e.t, err, store.ErrInvalid, fmt.Sprintf("fork at %d of 1 event", at))
	}
	_, err := e.s.ForkManagedSession(e.ctx, store.ForkParams{FromID: "sesn_missing", AtSeq: 1})
	mustErrIs(e.t, err, store.ErrNotFound, "fork of an unknown session")
	_, err = e.s.ForkManagedSession(e.ctx, store.ForkParams{FromID: s.ID, NewID: s.ID, AtSeq: 1})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "fork onto a taken id")
	// A resource that cannot be created fails the whole fork.
	_, err = e.s.ForkManagedSession(e.ctx, store.ForkParams{FromID: s.ID, NewID: "sesn_half", AtSeq: 1,
		Resources: []*store.SessionResource{
			{SessionID: "sesn_half", Kind: "file", MountPath: "/mnt/a", Doc: json.RawMessage(`{}`)},
			{SessionID: "sesn_half", Kind: "file", MountPath: "/mnt/a", Doc: json.RawMessage(`{}`)},
		}})
	mustErrIs(e.t, err, store.ErrConflict, "fork with two resources at one mount path")
	_, err = e.s.GetManagedSession(e.ctx, "sesn_half")
	mustErrIs(e.t, err, store.ErrNotFound, "the session of a failed fork")
}

func testBrRewind(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_rw", SandboxID: "sbx_1"})
	e.brTurn(s.ID) // seq 1 user.message, 2 status_running
	_, cp, err := e.s.CommitStep(e.ctx, store.StepCommit{SessionID: s.ID, Owner: brOwner, Step: 1,
		Events: brEvents("agent.tool_use", "agent.tool_result"), Workspace: "wsnap_1"}) // 3, 4
	mustOK(e.t, err, "CommitStep")
	_, _, err = e.s.EndTurn(e.ctx, store.EndTurn{SessionID: s.ID, Owner: brOwner, Status: store.RunCompleted,
		ProcessedSeq: 1, Events: brEvents("session.status_idle"), Workspace: "wsnap_2"}) // 5
	mustOK(e.t, err, "EndTurn 1")
	second := e.brTurn(s.ID) // 6, 7
	_, err = e.s.StartOp(e.ctx, &store.Op{ID: "op_late", SessionID: s.ID, Kind: "tool_exec", TurnSeq: second.TurnSeq,
		Status: store.OpStarted, StartedAt: sbAt(0)})
	mustOK(e.t, err, "StartOp of the second turn")
	_, _, err = e.s.RewindManagedSession(e.ctx, store.RewindParams{SessionID: s.ID, AtSeq: 4})
	mustErrIs(e.t, err, store.ErrConflict, "rewind while a turn runs")
	_, _, err = e.s.EndTurn(e.ctx, store.EndTurn{SessionID: s.ID, Owner: brOwner, Status: store.RunCompleted,
		ProcessedSeq: 6, Events: brEvents("session.status_idle"), Workspace: "wsnap_3"}) // 8
	mustOK(e.t, err, "EndTurn 2")
	before := e.brIDs(s.ID)

	sess, branch, err := e.s.RewindManagedSession(e.ctx, store.RewindParams{SessionID: s.ID, AtSeq: cp.MessageCount,
		BranchID: "sesn_branch", Append: brEvents("session.status_idle"), Workspace: "wsnap_1", BranchWorkspace: "wsnap_3",
		ProcessedSeq: 2})
	mustOK(e.t, err, "RewindManagedSession")
	after := e.brIDs(s.ID)
	equal(e.t, "events after the rewind", len(after), 5)
	mgEqualIDs(e.t, "events kept", after[:4], before[:4]...)
	equal(e.t, "ProcessedSeq", sess.ProcessedSeq, int64(2))
	equal(e.t, "SandboxID", sess.SandboxID, "")
	equal(e.t, "WorkspaceSeed", sess.Lineage.WorkspaceSeed, "wsnap_1")
	mgEqualIDs(e.t, "the branch holds the whole log as it was", e.brIDs(branch.ID), before...)
	equal(e.t, "branch BranchOf", branch.Lineage.BranchOf, s.ID)
	equal(e.t, "branch BranchAtSeq", branch.Lineage.BranchAtSeq, int64(4))
	equal(e.t, "branch WorkspaceSeed", branch.Lineage.WorkspaceSeed, "wsnap_3")
	equal(e.t, "branch SandboxID (the old sandbox, the caller's to destroy)", branch.SandboxID, "sbx_1")
	if branch.Lineage.BranchedAt == nil {
		e.t.Fatal("branch has no BranchedAt")
	}
	runs, err := e.s.ListRuns(e.ctx, s.ID)
	mustOK(e.t, err, "ListRuns of the session")
	equal(e.t, "runs left with the session", len(runs), 1)
	bruns, err := e.s.ListRuns(e.ctx, branch.ID)
	mustOK(e.t, err, "ListRuns of the branch")
	equal(e.t, "runs moved to the branch", len(bruns), 1)
	equal(e.t, "moved run", bruns[0].ID, second.RunID)
	_, err = e.s.GetOp(e.ctx, s.ID, "op_late")
	mustErrIs(e.t, err, store.ErrNotFound, "the op journal of a rewound turn")
	cps, err := e.s.ListCheckpoints(e.ctx, s.ID)
	mustOK(e.t, err, "ListCheckpoints")
	for _, c := range cps {
		if c.MessageCount > 5 {
			e.t.Fatalf("checkpoint at %d survived a rewind to 4", c.MessageCount)
		}
	}
	branches, err := e.s.ListBranches(e.ctx, s.ID)
	mustOK(e.t, err, "ListBranches")
	mgEqualIDs(e.t, "branches", mgIDs(e.t, "branches", branches, nil, func(m *store.ManagedSession) string { return m.ID }), "sesn_branch")
	list, err := e.s.ListManagedSessions(e.ctx, store.ListResourcesParams{TenantID: mgTenant})
	mgEqualIDs(e.t, "sessions listed (no branch)", mgIDs(e.t, "ListManagedSessions", list, err, func(m *store.ManagedSession) string { return m.ID }), s.ID)

	// The session goes on: a new turn takes Seqs after the rewind point.
	evs := e.appendTypes(s.ID, "user.message")
	equal(e.t, "first Seq after the rewind", evs[0].Seq, int64(6))
	// The branch is read-only and cannot be rewound.
	_, err = e.s.AppendEvents(e.ctx, branch.ID, brEvents("user.message"))
	mustErrIs(e.t, err, store.ErrConflict, "append to an abandoned branch")
	_, err = e.s.AppendEventsBatch(e.ctx, map[string][]store.NewEvent{branch.ID: brEvents("user.message"), s.ID: brEvents("user.message")})
	mustErrIs(e.t, err, store.ErrConflict, "batch append to an abandoned branch")
	_, _, err = e.s.RewindManagedSession(e.ctx, store.RewindParams{SessionID: branch.ID, AtSeq: 1})
	mustErrIs(e.t, err, store.ErrConflict, "rewind of an abandoned branch")
	// Deleting the session deletes its branches.
	mustOK(e.t, e.s.DeleteManagedSession(e.ctx, s.ID), "DeleteManagedSession")
	_, err = e.s.GetManagedSession(e.ctx, branch.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "the branch of a deleted session")
}

func testBrRewindBadPaths(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_rw"})
	e.appendTypes(s.ID, "user.message", "session.status_idle")
	for _, at := range []int64{0, 3} {
		_, _, err := e.s.RewindManagedSession(e.ctx, store.RewindParams{SessionID: s.ID, AtSeq: at})
		mustErrIs(e.t, err, store.ErrInvalid, fmt.Sprintf("rewind to %d of 2 events", at))
	}
	_, _, err := e.s.RewindManagedSession(e.ctx, store.RewindParams{SessionID: s.ID, AtSeq: 2})
	mustErrIs(e.t, err, store.ErrInvalid, "rewind to the last event")
	_, _, err = e.s.RewindManagedSession(e.ctx, store.RewindParams{SessionID: "sesn_missing", AtSeq: 1})
	mustErrIs(e.t, err, store.ErrNotFound, "rewind of an unknown session")
	_, err = e.s.ListBranches(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "ListBranches of an unknown session")
	equal(e.t, "events after the refused rewinds", e.lastSeq(s.ID), int64(2))
}

func testBrWorkspaceSnapshots(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_ws"})
	e.brTurn(s.ID)
	_, _, err := e.s.EndTurn(e.ctx, store.EndTurn{SessionID: s.ID, Owner: brOwner, Status: store.RunCompleted,
		Events: brEvents("session.status_idle"), Workspace: "wsnap_x"})
	mustOK(e.t, err, "EndTurn")
	_, err = e.s.ForkManagedSession(e.ctx, store.ForkParams{FromID: s.ID, NewID: "sesn_f", AtSeq: 1, Workspace: "wsnap_y"})
	mustOK(e.t, err, "ForkManagedSession")
	got, err := e.s.ListWorkspaceSnapshots(e.ctx)
	mustOK(e.t, err, "ListWorkspaceSnapshots")
	if len(got) != 2 || !got["wsnap_x"] || !got["wsnap_y"] {
		e.t.Fatalf("ListWorkspaceSnapshots = %v, want wsnap_x and wsnap_y", got)
	}
	mustOK(e.t, e.s.DeleteManagedSession(e.ctx, s.ID), "delete the source")
	mustOK(e.t, e.s.DeleteManagedSession(e.ctx, "sesn_f"), "delete the fork")
	got, err = e.s.ListWorkspaceSnapshots(e.ctx)
	mustOK(e.t, err, "ListWorkspaceSnapshots after deletes")
	equal(e.t, "snapshots named after deletes", len(got), 0)
}

// testBrInterruptFlag: appending user.interrupt sets the seed-004 interrupt
// flag in the same transaction, by either append path.
func testBrInterruptFlag(e *mgEnv) {
	s := e.session(store.ManagedSession{ID: "sesn_i"})
	e.appendTypes(s.ID, "user.message")
	f, err := e.s.CheckInterruptFlag(e.ctx, s.ID)
	mustOK(e.t, err, "CheckInterruptFlag")
	equal(e.t, "flag after a user.message", f.Set, false)
	e.appendTypes(s.ID, store.EventUserInterrupt)
	f, err = e.s.CheckInterruptFlag(e.ctx, s.ID)
	mustOK(e.t, err, "CheckInterruptFlag")
	equal(e.t, "flag after a user.interrupt", f.Set, true)
	equal(e.t, "flag reason", f.Reason, store.EventUserInterrupt)
	f, _ = e.s.CheckInterruptFlag(e.ctx, s.ID)
	equal(e.t, "flag after it was checked", f.Set, false)

	other := e.session(store.ManagedSession{ID: "sesn_j"})
	_, err = e.s.AppendEventsBatch(e.ctx, map[string][]store.NewEvent{
		s.ID: brEvents("agent.message"), other.ID: brEvents(store.EventUserInterrupt)})
	mustOK(e.t, err, "AppendEventsBatch")
	f, _ = e.s.CheckInterruptFlag(e.ctx, other.ID)
	equal(e.t, "flag of the batch's interrupted session", f.Set, true)
	f, _ = e.s.CheckInterruptFlag(e.ctx, s.ID)
	equal(e.t, "flag of the batch's other session", f.Set, false)
}
