package session

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/agentkernel/agentkernel/internal/journal"
	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/store"
)

// opCallCounter counts the journal writes a turn makes as transactions
// of their own (StartOp, CompleteOp), by op kind.
type opCallCounter struct {
	Store
	mu       sync.Mutex
	starts   map[string]int
	complete map[string]int
}

func (c *opCallCounter) StartOp(ctx context.Context, op *store.Op) (*store.Op, error) {
	c.mu.Lock()
	c.starts[op.Kind]++
	c.mu.Unlock()
	return c.Store.StartOp(ctx, op)
}

func (c *opCallCounter) CompleteOp(ctx context.Context, sessionID, opID string, result json.RawMessage) (*store.Op, error) {
	op, err := c.Store.GetOp(ctx, sessionID, opID)
	c.mu.Lock()
	if err == nil {
		c.complete[op.Kind]++
	} else {
		c.complete["?"]++
	}
	c.mu.Unlock()
	return c.Store.CompleteOp(ctx, sessionID, opID, result)
}

// TestToolCallJournalledWithItsEvents: a turn with one bash call writes
// the call's op_started with its agent.tool_use and its op_completed with
// its agent.tool_result, and the tool step's model request its op_started
// with the span's start and its op_completed with the span's end: none of
// them is a transaction of its own (StartOp / CompleteOp) any more, except
// the completion of the last model request, whose span end waits for the
// turn's end. The journal holds every op completed, with its result.
func TestToolCallJournalledWithItsEvents(t *testing.T) {
	counter := &opCallCounter{starts: map[string]int{}, complete: map[string]int{}}
	e := newRTEnv(t, func(r anthropictest.Request) turn {
		if r.AssistantTurns() == 0 {
			return turn{Text: "Writing.", ToolUses: []tu{{Name: "bash", Input: map[string]any{"command": "echo journalled > j.txt; cat j.txt"}}}}
		}
		return turn{Text: "Done."}
	}, true, func(c *RuntimeConfig) {
		counter.Store = c.Store
		c.Store = counter
	})
	s := e.session(t, "claude-test", "")
	st := e.follow(t, s.ID)
	e.say(t, s.ID, "go")
	res := st.untilType(EventAgentToolResult)
	if !strings.Contains(string(res.Data), "journalled") {
		t.Fatalf("tool result %s: want the command's output", res.Data)
	}
	st.untilType(EventStatusIdle)

	counter.mu.Lock()
	starts, completes := counter.starts, counter.complete
	counter.mu.Unlock()
	if starts[journal.KindToolExec] != 0 || completes[journal.KindToolExec] != 0 {
		t.Errorf("tool call: %d StartOp and %d CompleteOp of its own; want both written with its events",
			starts[journal.KindToolExec], completes[journal.KindToolExec])
	}
	if starts[journal.KindModelRequest] != 0 {
		t.Errorf("model requests: %d StartOp of their own; want each written with its span's start", starts[journal.KindModelRequest])
	}
	if completes[journal.KindModelRequest] != 1 {
		t.Errorf("model requests: %d CompleteOp of their own; want 1 (the turn's last, whose span end is held)", completes[journal.KindModelRequest])
	}
	ops, err := e.st.ListOps(context.Background(), s.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for _, op := range ops {
		kinds[op.Kind]++
		if op.Status != store.OpCompleted || len(op.Result) == 0 {
			t.Errorf("op %s (%s) is %s with result %s; want completed with its result", op.ID, op.Kind, op.Status, op.Result)
		}
	}
	if kinds[journal.KindToolExec] != 1 || kinds[journal.KindModelRequest] != 2 {
		t.Fatalf("journal holds %v; want 1 tool_exec and 2 model_request ops", kinds)
	}
}
