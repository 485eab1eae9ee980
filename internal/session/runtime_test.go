package session

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/sandbox"
	"github.com/agentkernel/agentkernel/internal/store"
)

type tu = anthropictest.ToolUse
type turn = anthropictest.Turn

func TestTurnRunsToolsInTheSandbox(t *testing.T) {
	e := newRTEnv(t, anthropictest.Script(
		turn{Text: "Writing it.", ToolUses: []tu{{Name: "bash", Input: map[string]any{"command": "echo hello-from-bash > note.txt"}}}},
		turn{ToolUses: []tu{{Name: "read", Input: map[string]any{"file_path": "note.txt"}}}},
		turn{Text: "The file says hello.", InputTokens: 100, OutputTokens: 20},
	), true)
	s := e.session(t, "claude-test", "")
	st := e.follow(t, s.ID)
	e.say(t, s.ID, "write a file and read it back")
	idle := st.untilType(EventStatusIdle)
	if got := stopType(t, idle); got != StopEndTurn {
		t.Fatalf("stop reason %q; events %v", got, st.types())
	}
	want := []string{EventUserMessage, EventStatusRunning,
		EventSpanModelStart, EventAgentMessage, EventAgentToolUse, EventSpanModelEnd, EventAgentToolResult,
		EventSpanModelStart, EventAgentToolUse, EventSpanModelEnd, EventAgentToolResult,
		EventSpanModelStart, EventAgentMessage, EventSpanModelEnd, EventStatusIdle}
	if strings.Join(st.types(), ",") != strings.Join(want, ",") {
		t.Fatalf("events\n got %v\nwant %v", st.types(), want)
	}
	// The read tool's result reached the model.
	reqs := e.fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d model requests", len(reqs))
	}
	var results []string
	for _, b := range reqs[2].AllBlocks() {
		if b.Type == "tool_result" {
			results = append(results, b.ToolResultText())
		}
	}
	if len(results) != 2 || !strings.Contains(results[1], "hello-from-bash") {
		t.Fatalf("tool results the model saw: %q", results)
	}
	for _, ev := range st.all {
		if ev.Type == EventAgentToolResult && body(t, ev).IsError {
			t.Fatalf("tool failed: %s", ev.Data)
		}
	}
	ctx := context.Background()
	got, err := e.st.GetManagedSession(ctx, s.ID)
	if err != nil {
		t.Fatal(err)
	}
	if got.SandboxID == "" || !strings.Contains(string(got.Usage), `"input_tokens":120`) || got.ProcessedSeq < 1 {
		t.Fatalf("session after turn: sandbox %q usage %s processed %d", got.SandboxID, got.Usage, got.ProcessedSeq)
	}
	if _, err := e.st.GetRunRow(ctx, s.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("run row after the turn: %v", err)
	}
	if b, err := e.mgr.ReadFileMax(ctx, "t1", got.SandboxID, "/workspace/note.txt", 1<<20); err != nil || strings.TrimSpace(string(b)) != "hello-from-bash" {
		t.Fatalf("file in sandbox: %q %v", b, err)
	}

	// Destroy: terminated, status_terminated, sandbox destroyed.
	if err := e.rt.Destroy(ctx, "t2", s.ID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("destroy from another tenant: %v", err)
	}
	if err := e.rt.Destroy(ctx, "t1", s.ID); err != nil {
		t.Fatal(err)
	}
	st.untilType(EventStatusTerminated)
	got, _ = e.st.GetManagedSession(ctx, s.ID)
	if got.TerminatedAt == nil {
		t.Fatal("terminated_at not set")
	}
	if in, err := e.mgr.Get(ctx, "t1", got.SandboxID); err != nil || in.State != sandbox.StateDestroyed {
		t.Fatalf("sandbox after destroy: %+v %v", in, err)
	}
	if bs, _ := e.mgr.Backups(ctx, "t1", got.SandboxID); len(bs) == 0 {
		t.Fatal("no final snapshot")
	}
}

func TestInterruptMidStream(t *testing.T) {
	e := newRTEnv(t, func(r anthropictest.Request) anthropictest.Turn {
		blocks := r.Blocks(len(r.Messages) - 1)
		if blocks[len(blocks)-1].Text == "please hang" {
			return turn{Text: "I am thinking very slowly", Hang: true}
		}
		return turn{Text: "quick answer"}
	}, false)
	s := e.session(t, "claude-test", `[]`)
	st := e.follow(t, s.ID)
	e.say(t, s.ID, "please hang")
	<-e.fake.Hanging
	e.send(t, s.ID, EventUserInterrupt, nil)
	idle := st.untilType(EventStatusIdle)
	if stopType(t, idle) != StopEndTurn {
		t.Fatalf("idle %s", idle.Data)
	}
	// An interrupt with nothing running changes nothing; the next message
	// gets a normal turn.
	e.send(t, s.ID, EventUserInterrupt, nil)
	e.say(t, s.ID, "now answer")
	st.until(func(ev store.SessionEvent) bool { return ev.Type == EventAgentMessage })
	st.untilType(EventStatusIdle)
	if r, i := st.count(EventStatusRunning), st.count(EventStatusIdle); r != 2 || i != 2 {
		t.Fatalf("running %d idle %d: %v", r, i, st.types())
	}
	if n := st.count(EventSessionError); n != 0 {
		t.Fatalf("errors: %v", st.types())
	}
}

func TestInterruptKillsRunningTool(t *testing.T) {
	e := newRTEnv(t, anthropictest.Script(
		turn{ToolUses: []tu{{Name: "bash", Input: map[string]any{"command": "echo started; sleep 600"}}}},
		turn{Text: "never reached"},
	), true)
	s := e.session(t, "claude-test", "")
	st := e.follow(t, s.ID)
	e.say(t, s.ID, "run something long")
	st.untilType(EventSpanModelEnd)
	// Interrupt once the command runs in the sandbox.
	var sbID string
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the tool never started")
		}
		if sbID == "" {
			got, _ := e.st.GetManagedSession(context.Background(), s.ID)
			sbID = got.SandboxID
			continue
		}
		if pgrepSleep(t, e, sbID) != "" {
			break
		}
	}
	e.send(t, s.ID, EventUserInterrupt, nil)
	res := st.untilType(EventAgentToolResult)
	if b := body(t, res); !b.IsError || !strings.Contains(b.Content[0].Text, "interrupted") {
		t.Fatalf("tool result %s", res.Data)
	}
	st.untilType(EventStatusIdle)
	for deadline := time.Now().Add(30 * time.Second); pgrepSleep(t, e, sbID) != ""; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("sleep still running after the interrupt")
		}
	}
}

func pgrepSleep(t *testing.T, e *rtEnv, sbID string) string {
	t.Helper()
	var buf strings.Builder
	_, err := e.mgr.Exec(context.Background(), "t1", sbID, sandboxExec("pgrep -x sleep || true"), func(_ string, b []byte) { buf.Write(b) })
	if err != nil {
		t.Fatalf("pgrep: %v", err)
	}
	return strings.TrimSpace(buf.String())
}

func TestCustomToolRoundTrip(t *testing.T) {
	e := newRTEnv(t, anthropictest.Script(
		turn{ToolUses: []tu{{Name: "get_weather", Input: map[string]any{"city": "Paris"}}}},
		turn{Text: "It is sunny in Paris."},
	), false)
	s := e.session(t, "claude-test", `[{"type":"custom","name":"get_weather","description":"weather","input_schema":{"type":"object","properties":{"city":{"type":"string"}}}}]`)
	st := e.follow(t, s.ID)
	e.say(t, s.ID, "weather in Paris?")
	use := st.untilType(EventAgentCustomToolUse)
	idle := st.untilType(EventStatusIdle)
	if stopType(t, idle) != StopRequiresAction || !strings.Contains(string(idle.Data), use.ID) {
		t.Fatalf("idle %s (custom tool use %s)", idle.Data, use.ID)
	}
	e.send(t, s.ID, EventUserCustomToolResult, map[string]any{"custom_tool_use_id": use.ID, "content": textContent("sunny, 24C")})
	st.untilType(EventStatusRunning)
	idle = st.untilType(EventStatusIdle)
	if stopType(t, idle) != StopEndTurn {
		t.Fatalf("second idle %s", idle.Data)
	}
	reqs := e.fake.Requests()
	last := reqs[len(reqs)-1].AllBlocks()
	found := false
	for _, b := range last {
		if b.Type == "tool_result" && b.ToolUseID == use.ID && b.ToolResultText() == "sunny, 24C" {
			found = true
		}
	}
	if !found {
		t.Fatalf("custom result not sent to the model: %+v", last)
	}
}

func TestToolConfirmation(t *testing.T) {
	e := newRTEnv(t, anthropictest.Script(
		turn{ToolUses: []tu{{Name: "bash", Input: map[string]any{"command": "echo confirmed"}}}},
		turn{ToolUses: []tu{{Name: "bash", Input: map[string]any{"command": "rm -rf /workspace"}}}},
		turn{Text: "ok"},
	), true)
	s := e.session(t, "claude-test", `[{"type":"agent_toolset_20260401","default_config":{"permission_policy":{"type":"always_ask"}}}]`)
	st := e.follow(t, s.ID)
	e.say(t, s.ID, "go")
	use := st.untilType(EventAgentToolUse)
	if !strings.Contains(string(use.Data), `"evaluated_permission":"ask"`) {
		t.Fatalf("tool use %s", use.Data)
	}
	if idle := st.untilType(EventStatusIdle); stopType(t, idle) != StopRequiresAction {
		t.Fatalf("idle %s", idle.Data)
	}
	e.send(t, s.ID, EventUserToolConfirmation, map[string]any{"tool_use_id": use.ID, "result": "allow"})
	res := st.untilType(EventAgentToolResult)
	if b := body(t, res); b.IsError || !strings.Contains(b.Content[0].Text, "confirmed") {
		t.Fatalf("allowed result %s", res.Data)
	}
	use2 := st.untilType(EventAgentToolUse)
	st.untilType(EventStatusIdle)
	e.send(t, s.ID, EventUserToolConfirmation, map[string]any{"tool_use_id": use2.ID, "result": "deny", "deny_message": "not that"})
	res = st.untilType(EventAgentToolResult)
	if b := body(t, res); !b.IsError || !strings.Contains(b.Content[0].Text, "not that") {
		t.Fatalf("denied result %s", res.Data)
	}
	if idle := st.untilType(EventStatusIdle); stopType(t, idle) != StopEndTurn {
		t.Fatalf("final idle %s", idle.Data)
	}
}

func TestMessageQueuedDuringTurnIsAnsweredNext(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	e := newRTEnv(t, func(r anthropictest.Request) anthropictest.Turn {
		if r.AssistantTurns() == 0 {
			started <- struct{}{}
			<-release
			return turn{Text: "answer one"}
		}
		return turn{Text: "answer two"}
	}, false)
	s := e.session(t, "claude-test", `[]`)
	st := e.follow(t, s.ID)
	e.say(t, s.ID, "first")
	<-started
	e.say(t, s.ID, "second")
	close(release)
	st.untilType(EventStatusIdle)
	st.untilType(EventStatusRunning)
	st.untilType(EventStatusIdle)
	reqs := e.fake.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests", len(reqs))
	}
	var texts []string
	for _, b := range reqs[1].AllBlocks() {
		texts = append(texts, b.Text)
	}
	if strings.Join(texts, "|") != "first|answer one|second" {
		t.Fatalf("second request: %q", texts)
	}
}

func TestUnknownModelGetsSessionError(t *testing.T) {
	e := newRTEnv(t, nil, false)
	s := e.session(t, "mystery-model", `[]`)
	st := e.follow(t, s.ID)
	e.say(t, s.ID, "hi")
	errEv := st.untilType(EventSessionError)
	if !strings.Contains(string(errEv.Data), `models.\"mystery-model\"`) {
		t.Fatalf("error %s", errEv.Data)
	}
	if idle := st.untilType(EventStatusIdle); stopType(t, idle) != StopEndTurn {
		t.Fatalf("idle %s", idle.Data)
	}
}
