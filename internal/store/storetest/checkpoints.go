package storetest

import (
	"github.com/agentkernel/agentkernel/internal/store"
)

var checkpointCases = []testCase{
	{"CreateGetList", testCheckpoints},
	{"LatestFollowsPointerNotStepCount", testLatestFollowsPointer},
	{"BadPaths", testCheckpointBadPaths},
}

func testCheckpoints(e *env) {
	s0 := e.sessionWith(store.CreateSessionParams{ID: "sesn_cp", CustomState: []byte(`{"k":"v1"}`)})
	e.appendMsgs(s0.ID, "a", "b")
	_, err := e.s.GetLatestCheckpoint(e.ctx, s0.ID)
	mustErrIs(e.t, err, store.ErrNotFound, "GetLatestCheckpoint(none yet)")

	cp1, err := e.s.CreateCheckpoint(e.ctx, s0.ID, store.CheckpointMeta{ID: "cp_1", StepCount: 3, RunID: "run_1"})
	mustOK(e.t, err, "CreateCheckpoint")
	after := e.get(s0.ID)
	equal(e.t, "pointer", after.CheckpointID, "cp_1")
	if after.Version <= s0.Version {
		e.t.Fatal("CreateCheckpoint did not bump the version")
	}
	equal(e.t, "checkpoint Version is the version its write produced", cp1.Version, after.Version)
	equal(e.t, "MessageCount", cp1.MessageCount, 2)
	equal(e.t, "StepCount", cp1.StepCount, 3)
	equal(e.t, "SessionID", cp1.SessionID, s0.ID)
	jsonEq(e.t, "snapshot custom state", cp1.State.CustomState, `{"k":"v1"}`)
	equal(e.t, "snapshot status", cp1.State.Status, store.StatusActive)
	if cp1.CreatedAt.IsZero() || cp1.Source == "" {
		e.t.Fatalf("checkpoint without CreatedAt or Source: %+v", cp1)
	}

	// Later changes do not touch the snapshot.
	_, err = e.s.MergeCustomState(e.ctx, s0.ID, []byte(`{"k":"v2"}`))
	mustOK(e.t, err, "MergeCustomState")
	e.appendMsgs(s0.ID, "c")
	cp2, err := e.s.CreateCheckpoint(e.ctx, s0.ID, store.CheckpointMeta{StepCount: 4})
	mustOK(e.t, err, "CreateCheckpoint without id")
	if cp2.ID == "" || cp2.ID == cp1.ID {
		e.t.Fatalf("generated checkpoint id %q", cp2.ID)
	}
	equal(e.t, "second MessageCount", cp2.MessageCount, 3)
	jsonEq(e.t, "second snapshot", cp2.State.CustomState, `{"k":"v2"}`)

	got, err := e.s.GetCheckpoint(e.ctx, s0.ID, "cp_1")
	mustOK(e.t, err, "GetCheckpoint")
	equal(e.t, "GetCheckpoint MessageCount", got.MessageCount, 2)
	jsonEq(e.t, "GetCheckpoint snapshot", got.State.CustomState, `{"k":"v1"}`)
	equal(e.t, "GetCheckpoint RunID", got.RunID, "run_1")

	list, err := e.s.ListCheckpoints(e.ctx, s0.ID)
	mustOK(e.t, err, "ListCheckpoints")
	if len(list) != 2 || list[0].ID != cp1.ID || list[1].ID != cp2.ID {
		e.t.Fatalf("ListCheckpoints: %v", list)
	}
	latest, err := e.s.GetLatestCheckpoint(e.ctx, s0.ID)
	mustOK(e.t, err, "GetLatestCheckpoint")
	equal(e.t, "latest", latest.ID, cp2.ID)

	fresh := e.session()
	list, err = e.s.ListCheckpoints(e.ctx, fresh.ID)
	mustOK(e.t, err, "ListCheckpoints(none)")
	equal(e.t, "checkpoints of a fresh session", len(list), 0)
}

// testLatestFollowsPointer is seed 004's regression: step counts restart
// every turn, so the latest checkpoint is the pointer's, not the highest
// StepCount. Ids are chosen so that ordering by id is wrong too.
func testLatestFollowsPointer(e *env) {
	s0 := e.session()
	e.appendMsgs(s0.ID, "turn 1 user", "turn 1 assistant")
	_, err := e.s.CreateCheckpoint(e.ctx, s0.ID, store.CheckpointMeta{ID: "cp_z_turn1", StepCount: 9})
	mustOK(e.t, err, "turn 1 checkpoint")

	// Turn 2 suspends at its first step via the atomic primitive.
	res, err := e.s.SaveStateAndPromoteStaging(e.ctx, store.SaveAndPromoteParams{SessionID: s0.ID,
		State:          store.SessionState{Status: store.StatusPaused, StepCount: 1, CustomState: []byte(`{}`)},
		AppendMessages: msgs("turn 2 user", "turn 2 tool_use"),
		Checkpoint:     store.CheckpointMeta{ID: "cp_a_turn2", StepCount: 1}})
	mustOK(e.t, err, "turn 2 SaveStateAndPromoteStaging")
	latest, err := e.s.GetLatestCheckpoint(e.ctx, s0.ID)
	mustOK(e.t, err, "GetLatestCheckpoint")
	equal(e.t, "latest checkpoint", latest.ID, "cp_a_turn2")
	equal(e.t, "latest MessageCount", latest.MessageCount, 4)
	equal(e.t, "latest Version", latest.Version, res.NewVersion)

	// And once more through CreateCheckpoint with a lower step count.
	_, err = e.s.CreateCheckpoint(e.ctx, s0.ID, store.CheckpointMeta{ID: "cp_0_turn3", StepCount: 0})
	mustOK(e.t, err, "turn 3 checkpoint")
	latest, err = e.s.GetLatestCheckpoint(e.ctx, s0.ID)
	mustOK(e.t, err, "GetLatestCheckpoint")
	equal(e.t, "latest after turn 3", latest.ID, "cp_0_turn3")
	equal(e.t, "pointer", e.get(s0.ID).CheckpointID, "cp_0_turn3")
}

func testCheckpointBadPaths(e *env) {
	s0 := e.session()
	other := e.session()
	_, err := e.s.CreateCheckpoint(e.ctx, s0.ID, store.CheckpointMeta{ID: "cp_dup"})
	mustOK(e.t, err, "CreateCheckpoint")
	v := e.get(s0.ID).Version
	_, err = e.s.CreateCheckpoint(e.ctx, s0.ID, store.CheckpointMeta{ID: "cp_dup"})
	mustErrIs(e.t, err, store.ErrAlreadyExists, "duplicate checkpoint id")
	equal(e.t, "version after a rejected checkpoint", e.get(s0.ID).Version, v)
	_, err = e.s.CreateCheckpoint(e.ctx, "sesn_missing", store.CheckpointMeta{})
	mustErrIs(e.t, err, store.ErrNotFound, "CreateCheckpoint(unknown session)")
	_, err = e.s.GetCheckpoint(e.ctx, s0.ID, "cp_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetCheckpoint(unknown)")
	_, err = e.s.GetCheckpoint(e.ctx, other.ID, "cp_dup")
	mustErrIs(e.t, err, store.ErrNotFound, "GetCheckpoint of another session's checkpoint")
	_, err = e.s.GetLatestCheckpoint(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "GetLatestCheckpoint(unknown session)")
	_, err = e.s.ListCheckpoints(e.ctx, "sesn_missing")
	mustErrIs(e.t, err, store.ErrNotFound, "ListCheckpoints(unknown session)")
}
