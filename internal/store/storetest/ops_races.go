package storetest

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentkernel/agentkernel/internal/store"
)

var opRaceCases = []opCase{
	{"StartExactlyOneInserts", testOpStartRace},
	{"CompleteExactlyOneWins", testOpCompleteRace},
}

// testOpStartRace: a recovery and a live turn replaying the same call at
// once must agree on one journal row.
func testOpStartRace(e *opEnv) {
	const n = 20
	ops := make([]*store.Op, n)
	errs := make([]error, n)
	race(n, func(i int) {
		ops[i], errs[i] = e.s.StartOp(e.ctx, &store.Op{ID: opID(1), SessionID: "sesn_ops", Kind: "tool_exec",
			TurnSeq: 1, Args: json.RawMessage(fmt.Sprintf(`{"starter":%d}`, i))})
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			e.t.Fatalf("starters %d and %d both inserted", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrAlreadyExists):
			e.t.Fatalf("starter %d: got %v, want nil or ErrAlreadyExists", i, err)
		}
	}
	if winner < 0 {
		e.t.Fatal("no starter inserted the op")
	}
	stored := e.get("sesn_ops", opID(1))
	jsonEq(e.t, "stored args", stored.Args, fmt.Sprintf(`{"starter":%d}`, winner))
	for i, op := range ops {
		if op == nil {
			e.t.Fatalf("starter %d got no op", i)
		}
		opSame(e.t, fmt.Sprintf("op returned to starter %d", i), op, stored)
	}
}

// testOpCompleteRace: of racing completers exactly one records its result.
func testOpCompleteRace(e *opEnv) {
	const n = 20
	e.start(store.Op{ID: opID(1), SessionID: "sesn_ops", Kind: "tool_exec", TurnSeq: 1})
	ops := make([]*store.Op, n)
	errs := make([]error, n)
	race(n, func(i int) {
		ops[i], errs[i] = e.s.CompleteOp(e.ctx, "sesn_ops", opID(1), json.RawMessage(fmt.Sprintf(`{"completer":%d}`, i)))
	})
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			e.t.Fatalf("completers %d and %d both won", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, store.ErrConflict):
			e.t.Fatalf("completer %d: got %v, want nil or ErrConflict", i, err)
		}
	}
	if winner < 0 {
		e.t.Fatal("no completer won")
	}
	stored := e.get("sesn_ops", opID(1))
	equal(e.t, "Status", stored.Status, store.OpCompleted)
	jsonEq(e.t, "stored result", stored.Result, fmt.Sprintf(`{"completer":%d}`, winner))
	for i, op := range ops {
		if op == nil {
			e.t.Fatalf("completer %d got no op", i)
		}
		opSame(e.t, fmt.Sprintf("op returned to completer %d", i), op, stored)
	}
}
