package storetest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/store"
)

// ExerciseOps runs the OpStore contract: the op journal, stream chunks and
// background tasks of seed 003. newStore must return a fresh, empty store
// for each call and arrange its Close with t.Cleanup. Ops, chunks and tasks
// carry session ids without a session row, so an engine must not tie them
// to a sessions table.
func ExerciseOps(ctx context.Context, t *testing.T, newStore func(t *testing.T) store.OpStore) {
	t.Helper()
	groups := []struct {
		name  string
		cases []opCase
	}{
		{"Ops", opJournalCases},
		{"OpRaces", opRaceCases},
		{"StreamChunks", opChunkCases},
		{"BackgroundTasks", opTaskCases},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) {
			for _, c := range g.cases {
				t.Run(c.name, func(t *testing.T) {
					c.fn(&opEnv{ctx: ctx, t: t, s: newStore(t)})
				})
			}
		})
	}
}

type opCase struct {
	name string
	fn   func(e *opEnv)
}

type opEnv struct {
	ctx context.Context
	t   *testing.T
	s   store.OpStore
}

// opEpoch is a fixed past instant at microsecond precision in a zone that
// is not UTC: engines must compare instants, and an engine's "now" is
// always after it.
var opEpoch = time.Date(2021, 6, 7, 8, 9, 10, 654321000, time.FixedZone("UTC-5", -5*3600))

func opAt(d time.Duration) time.Time { return opEpoch.Add(d) }

// opID makes a journal-looking op id that differs per n.
func opID(n int) string { return fmt.Sprintf("op_%016x", n) }

// start records op, failing the test on any error.
func (e *opEnv) start(op store.Op) *store.Op {
	e.t.Helper()
	out, err := e.s.StartOp(e.ctx, &op)
	mustOK(e.t, err, fmt.Sprintf("StartOp(%s)", op.ID))
	return out
}

func (e *opEnv) get(sessionID, opID string) *store.Op {
	e.t.Helper()
	out, err := e.s.GetOp(e.ctx, sessionID, opID)
	mustOK(e.t, err, fmt.Sprintf("GetOp(%s)", opID))
	return out
}

// listIDs lists op ids of a session (of one turn when turn > 0).
func (e *opEnv) listIDs(sessionID string, turn int64) []string {
	e.t.Helper()
	ops, err := e.s.ListOps(e.ctx, sessionID, turn)
	mustOK(e.t, err, "ListOps")
	out := []string{}
	for _, op := range ops {
		out = append(out, op.ID)
	}
	return out
}

// opSame checks every field of got against want.
func opSame(t *testing.T, what string, got, want *store.Op) {
	t.Helper()
	equal(t, what+" ID", got.ID, want.ID)
	equal(t, what+" SessionID", got.SessionID, want.SessionID)
	equal(t, what+" Kind", got.Kind, want.Kind)
	equal(t, what+" TurnSeq", got.TurnSeq, want.TurnSeq)
	equal(t, what+" Step", got.Step, want.Step)
	equal(t, what+" Index", got.Index, want.Index)
	sbSameJSON(t, what+" Args", got.Args, want.Args)
	equal(t, what+" Status", got.Status, want.Status)
	sbSameJSON(t, what+" Result", got.Result, want.Result)
	sbSameTime(t, what+" StartedAt", got.StartedAt, want.StartedAt)
	sbSameTimePtr(t, what+" CompletedAt", got.CompletedAt, want.CompletedAt)
}
