package crashtest

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/session"
)

// threadTool: each worker thread marks that it started (a file per
// process), runs a few seconds, then appends one "done".
const threadTool = "mkdir -p /workspace/started; touch /workspace/started/$$; sleep 3; echo done >> /workspace/out"

// threadsModel plays a coordinator that opens two threads with the worker
// agent and waits for both answers, and the worker, which runs threadTool.
// The coordinator is told apart by its create_thread tool.
func threadsModel(r anthropictest.Request) anthropictest.Turn {
	coordinator := false
	for _, t := range r.Tools {
		var d struct {
			Name string `json:"name"`
		}
		_ = json.Unmarshal(t, &d)
		coordinator = coordinator || d.Name == session.ToolCreateThread
	}
	if !coordinator {
		if hasToolResult(r) {
			return anthropictest.Turn{Text: "worker finished"}
		}
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": threadTool}}}}
	}
	answers := 0
	for _, b := range r.AllBlocks() {
		if b.Type == "text" && strings.Contains(b.Text, "[message from thread") {
			answers++
		}
	}
	switch {
	case answers > 0:
		return anthropictest.Turn{Text: "both threads answered"}
	case hasToolResult(r):
		return anthropictest.Turn{Text: "waiting for the threads"}
	}
	open := func(task string) anthropictest.ToolUse {
		return anthropictest.ToolUse{Name: session.ToolCreateThread, Input: map[string]any{"agent": "worker", "message": task}}
	}
	return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{open("first"), open("second")}}
}

// newCoordinatorSession makes a worker agent, a coordinator whose roster
// names it, and a session of the coordinator.
func newCoordinatorSession(t *testing.T, c anthropic.Client) string {
	t.Helper()
	ctx := context.Background()
	toolset := []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
		Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}}
	worker, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "worker",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"}, Tools: toolset})
	if err != nil {
		t.Fatal(err)
	}
	coord, err := c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: "coordinator",
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: "claude-sonnet-4-5"}, Tools: toolset,
		Multiagent: anthropic.BetaManagedAgentsMultiagentParamsOfCoordinator([]anthropic.BetaManagedAgentsMultiagentRosterEntryParamsUnion{
			{OfString: anthropic.String(worker.ID)}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	env, err := c.Beta.Environments.New(ctx, anthropic.BetaEnvironmentNewParams{Name: "threads"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(coord.ID)}, EnvironmentID: env.ID})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

// checkThreadsOnce checks a coordinator session that opened two worker
// threads: two threads, opened once each, each answered once, and each
// worker's command ran once in the one shared sandbox.
func checkThreadsOnce(t *testing.T, n *node, c anthropic.Client, sid string) {
	t.Helper()
	evs := waitIdle(t, n, c, sid, 1)
	checkTrajectory(t, evs)
	created := ofType(evs, session.EventThreadCreated)
	received := ofType(evs, session.EventThreadMessageReceived)
	if len(created) != 2 || len(received) != 2 || len(ofType(evs, session.EventThreadMessageSent)) != 2 {
		t.Fatalf("want two threads opened and answered once each; trajectory %v\n%s", types(evs), n.logs())
	}
	ids := map[string]bool{}
	for _, e := range created {
		var b struct {
			ID string `json:"session_thread_id"`
		}
		_ = json.Unmarshal([]byte(e.Raw), &b)
		ids[b.ID] = true
	}
	if len(ids) != 2 {
		t.Fatalf("thread ids %v: want two distinct", ids)
	}
	for id := range ids {
		tevs := threadEvents(t, c, sid, id)
		res := ofType(tevs, "agent.tool_result")
		if len(res) != 1 || len(ofType(tevs, "agent.message")) != 1 {
			t.Fatalf("thread %s: %v: want one tool call and one answer", id, types(tevs))
		}
	}
	if last := ofType(evs, "agent.message"); len(last) == 0 || last[len(last)-1].text() != "both threads answered" {
		t.Fatalf("the coordinator's last message: %v", types(evs))
	}
	outs, _ := filepath.Glob(filepath.Join(n.home, "sandboxes", "*", "workspace", "out"))
	if len(outs) != 1 {
		t.Fatalf("want the threads' one shared sandbox, found outputs %v", outs)
	}
	if b, _ := os.ReadFile(outs[0]); strings.Count(string(b), "done") != 2 {
		t.Fatalf("the workers' commands ran %d times in all, want 2", strings.Count(string(b), "done"))
	}
}

// threadEvents lists every event of a session's thread, oldest first.
func threadEvents(t *testing.T, c anthropic.Client, sid, tid string) []event {
	t.Helper()
	return collectEvents(t, c.Beta.Sessions.Threads.Events.ListAutoPaging(context.Background(), tid,
		anthropic.BetaSessionThreadEventListParams{SessionID: sid, Limit: anthropic.Int(500)}))
}

// TestKillMidThread: the daemon dies while a thread's tool call runs in
// the shared sandbox. After the restart every thread completes once: no
// thread is opened twice, no command runs twice, every answer reaches the
// coordinator once, and the coordinator's turn ends once.
func TestKillMidThread(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		fake := anthropictest.New(t, threadsModel)
		n := newNode(t, engine, fake.URL)
		n.start()
		c := n.client()
		sid := newCoordinatorSession(t, c)
		send(t, c, sid, "split the work")
		deadline := time.Now().Add(60 * time.Second)
		for {
			m, _ := filepath.Glob(filepath.Join(n.home, "sandboxes", "*", "workspace", "started", "*"))
			if len(m) > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no thread's tool started\n%s", n.logs())
			}
			time.Sleep(10 * time.Millisecond)
		}
		n.kill()
		outs, _ := filepath.Glob(filepath.Join(n.home, "sandboxes", "*", "workspace", "out"))
		if len(outs) > 0 {
			if b, _ := os.ReadFile(outs[0]); strings.Count(string(b), "done") == 2 {
				t.Fatal("both threads finished before the kill: the test did not kill mid-thread")
			}
		}
		n.start()
		checkThreadsOnce(t, n, n.client(), sid)
	})
}

// TestKillAfterThreadOpen: the daemon dies after a thread's session was
// stored and before the coordinator's log shows it (or the call's result
// is journalled). The call is resent after the restart: the thread is not
// opened twice and its task is not sent twice.
func TestKillAfterThreadOpen(t *testing.T) {
	engines(t, func(t *testing.T, engine string) {
		fake := anthropictest.New(t, threadsModel)
		n := newNode(t, engine, fake.URL)
		n.arm(session.FailAfterThreadOpen)
		n.start()
		c := n.client()
		sid := newCoordinatorSession(t, c)
		send(t, c, sid, "split the work")
		n.waitReached(session.FailAfterThreadOpen)
		n.kill()
		n.disarm(session.FailAfterThreadOpen)
		n.start()
		checkThreadsOnce(t, n, n.client(), sid)
	})
}
