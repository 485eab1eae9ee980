package session_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/session"
)

func toolCall(name string, input map[string]any) map[string]any {
	return map[string]any{"name": name, "input": input}
}

func createThread(agent, task string) map[string]any {
	return toolCall(session.ToolCreateThread, map[string]any{"agent": agent, "message": task})
}

// threadScripts: a coordinator that opens two worker threads, waits, then
// counts in the shared sandbox what the workers wrote; a worker that
// writes a line; a slow worker and its coordinator, for interrupts.
var threadScripts = map[string]map[string]any{
	"coord": {"turns": []any{
		map[string]any{"tool_calls": []any{createThread("worker", "task one"), createThread("worker", "task two")}},
		text("waiting for the workers"),
		map[string]any{"tool_calls": []any{toolCall("bash", map[string]any{"command": "wc -l < /workspace/threads.log"})}},
		text("all done"),
	}},
	"worker": {"turns": []any{
		map[string]any{"tool_calls": []any{toolCall("bash", map[string]any{"command": "echo worked >> /workspace/threads.log"})}},
		text("worker done"),
	}},
	"coord-slow": {"turns": []any{
		map[string]any{"tool_calls": []any{createThread("slow", "take your time")}},
		text("waiting"),
		text("after the interrupt"),
	}, "loop": true},
	"bench-coord": {"turns": []any{
		map[string]any{"tool_calls": []any{toolCall("bash", map[string]any{"command": "true"})}},
		map[string]any{"tool_calls": []any{createThread("bench-worker", "x")}},
		text("waiting"),
		text("done"),
	}},
	"bench-worker": {"turns": []any{
		map[string]any{"tool_calls": []any{toolCall("bash", map[string]any{"command": "true"})}},
		text("done"),
	}},
	"coord-ask": {"turns": []any{
		map[string]any{"tool_calls": []any{createThread("asker", "ask first")}},
		text("waiting"),
		text("got the answer"),
	}},
	"asker": {"turns": []any{
		map[string]any{"tool_calls": []any{toolCall("bash", map[string]any{"command": "echo asked"})}},
		text("asker done"),
	}},
	"coord-fail": {"turns": []any{
		map[string]any{"tool_calls": []any{createThread("failing", "fail")}},
		text("waiting"),
		text("noted the failure"),
	}},
	"failing": {"turns": []any{map[string]any{"error": "the model route is down"}}},
	"slow": {"turns": []any{
		map[string]any{"tool_calls": []any{toolCall("bash", map[string]any{"command": "sleep 600"})}},
		text("slow done"),
	}},
}

type threadsEnv struct {
	c   anthropic.Client
	d   *daemontest.Daemon
	env string
}

func startThreads(t testing.TB) *threadsEnv {
	c, d, env := startScripted(t, threadScripts)
	return &threadsEnv{c: c, d: d, env: env}
}

var toolset = []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
	Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401}}}

// coordinator creates the worker agent and a coordinator naming it, and a
// session of the coordinator.
func (e *threadsEnv) coordinator(t testing.TB, coordModel, workerModel string, workerTools ...anthropic.BetaAgentNewParamsToolUnion) string {
	t.Helper()
	ctx := context.Background()
	if workerTools == nil {
		workerTools = toolset
	}
	worker, err := e.c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: workerModel,
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: workerModel}, Tools: workerTools})
	if err != nil {
		t.Fatal(err)
	}
	coord, err := e.c.Beta.Agents.New(ctx, anthropic.BetaAgentNewParams{Name: coordModel,
		Model: anthropic.BetaManagedAgentsModelConfigParams{ID: coordModel}, Tools: toolset,
		Multiagent: anthropic.BetaManagedAgentsMultiagentParamsOfCoordinator([]anthropic.BetaManagedAgentsMultiagentRosterEntryParamsUnion{
			{OfBetaManagedAgentsAgents: &anthropic.BetaManagedAgentsAgentParams{ID: worker.ID, Type: anthropic.BetaManagedAgentsAgentParamsTypeAgent,
				Version: anthropic.Int(worker.Version)}}}),
	})
	if err != nil {
		t.Fatal(err)
	}
	s, err := e.c.Beta.Sessions.New(ctx, anthropic.BetaSessionNewParams{
		Agent: anthropic.BetaSessionNewParamsAgentUnion{OfString: anthropic.String(coord.ID)}, EnvironmentID: e.env})
	if err != nil {
		t.Fatal(err)
	}
	return s.ID
}

func (e *threadsEnv) say(t testing.TB, sid, msg string) {
	t.Helper()
	_, err := e.c.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserMessage: &anthropic.BetaManagedAgentsUserMessageEventParams{
			Type:    anthropic.BetaManagedAgentsUserMessageEventParamsTypeUserMessage,
			Content: []anthropic.BetaManagedAgentsUserMessageEventParamsContentUnion{{OfText: &anthropic.BetaManagedAgentsTextBlockParam{Text: msg, Type: anthropic.BetaManagedAgentsTextBlockTypeText}}},
		}}}})
	if err != nil {
		t.Fatal(err)
	}
}

// log lists the events of a session, or of one of its threads (tid).
func (e *threadsEnv) log(t testing.TB, sid string, tid ...string) []anthropic.BetaManagedAgentsSessionEventUnion {
	t.Helper()
	ctx := context.Background()
	if len(tid) > 0 {
		page, err := e.c.Beta.Sessions.Threads.Events.List(ctx, tid[0], anthropic.BetaSessionThreadEventListParams{SessionID: sid, Limit: anthropic.Int(1000)})
		if err != nil {
			t.Fatal(err)
		}
		return page.Data
	}
	page, err := e.c.Beta.Sessions.Events.List(ctx, sid, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	if err != nil {
		t.Fatal(err)
	}
	return page.Data
}

// waitFor waits until the log of the session (or of its thread tid) holds
// n events of type typ.
func (e *threadsEnv) waitFor(t testing.TB, sid, typ string, n int, tid ...string) []anthropic.BetaManagedAgentsSessionEventUnion {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		evs := e.log(t, sid, tid...)
		if len(ofKind(evs, typ)) >= n {
			return evs
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s %v: %d×%s not reached in 90s; log %v", sid, tid, n, typ, kinds(evs))
		}
		time.Sleep(25 * time.Millisecond)
	}
}

func kinds(evs []anthropic.BetaManagedAgentsSessionEventUnion) []string {
	out := make([]string, len(evs))
	for i, ev := range evs {
		out[i] = ev.Type
	}
	return out
}

// threadIDs are the threads a session's log says it opened.
func threadIDs(evs []anthropic.BetaManagedAgentsSessionEventUnion) []string {
	var out []string
	for _, ev := range ofKind(evs, session.EventThreadCreated) {
		out = append(out, ev.SessionThreadID)
	}
	return out
}

// TestCoordinatorDelegatesToTwoThreads: a coordinator opens two threads
// with a worker agent in one step. Each thread is a conversation of its
// own whose bash call runs in the session's sandbox; the primary thread
// shows each thread's creation, status and answer; the coordinator's turn
// ends once, after both answers, and sees both workers' writes.
func TestCoordinatorDelegatesToTwoThreads(t *testing.T) {
	e := startThreads(t)
	sid := e.coordinator(t, "coord", "worker")
	e.say(t, sid, "split the work")
	evs := e.waitFor(t, sid, "session.status_idle", 1)
	if got := kinds(evs); len(ofKind(evs, "session.status_idle")) != 1 || evs[len(evs)-1].Type != "session.status_idle" {
		t.Fatalf("want one turn ending the log, got %v", got)
	}
	ids := threadIDs(evs)
	if len(ids) != 2 || ids[0] == ids[1] {
		t.Fatalf("threads opened: %v", ids)
	}
	received := ofKind(evs, session.EventThreadMessageReceived)
	if len(received) != 2 || len(ofKind(evs, session.EventThreadMessageSent)) != 2 {
		t.Fatalf("want two messages each way, got %v", kinds(evs))
	}
	for _, ev := range received {
		if ev.FromAgentName != "worker" || evText(ev) != "worker done" {
			t.Fatalf("thread answer %s", ev.RawJSON())
		}
	}
	for _, typ := range []string{session.EventThreadStatusRunning, session.EventThreadStatusIdle} {
		if n := len(ofKind(evs, typ)); n != 2 {
			t.Fatalf("%d×%s, want 2: %v", n, typ, kinds(evs))
		}
	}
	// The coordinator counted the workers' two lines in the shared sandbox.
	results := ofKind(evs, "agent.tool_result")
	last := results[len(results)-1]
	if strings.TrimSpace(evText(last)) != "2" {
		t.Fatalf("the coordinator's count: %s", last.RawJSON())
	}
	msgs := ofKind(evs, "agent.message")
	if evText(msgs[len(msgs)-1]) != "all done" {
		t.Fatalf("the coordinator's last message: %s", msgs[len(msgs)-1].RawJSON())
	}
	for _, id := range ids {
		tevs := e.log(t, sid, id)
		uses := ofKind(tevs, "agent.tool_use")
		if len(uses) != 1 || uses[0].Name != "bash" || len(ofKind(tevs, "agent.tool_result")) != 1 {
			t.Fatalf("thread %s: %v", id, kinds(tevs))
		}
		if first := ofKind(tevs, "user.message"); len(first) != 1 || !strings.HasPrefix(evText(first[0]), "task ") {
			t.Fatalf("thread %s got its task as %v", id, kinds(tevs))
		}
	}
	// Threads are not sessions of the tenant's list, nor reachable as one.
	ctx := context.Background()
	page, err := e.c.Beta.Sessions.List(ctx, anthropic.BetaSessionListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Data) != 1 || page.Data[0].ID != sid {
		t.Fatalf("sessions listed: %d", len(page.Data))
	}
	if _, err := e.c.Beta.Sessions.Get(ctx, ids[0], anthropic.BetaSessionGetParams{}); err == nil {
		t.Fatal("a thread is reachable as a session")
	}
	// The SDK's threads: the primary, then both children, idle, running
	// the worker agent.
	threads, err := e.c.Beta.Sessions.Threads.List(ctx, sid, anthropic.BetaSessionThreadListParams{})
	if err != nil {
		t.Fatal(err)
	}
	if len(threads.Data) != 3 || threads.Data[0].ID != session.PrimaryThreadID(sid) || threads.Data[0].ParentThreadID != "" {
		t.Fatalf("threads %s", threads.RawJSON())
	}
	for _, th := range threads.Data[1:] {
		if th.Status != "idle" || th.Agent.Name != "worker" || th.ParentThreadID != threads.Data[0].ID || th.SessionID != sid {
			t.Fatalf("thread %s", th.RawJSON())
		}
	}
	// A fork would have to take the threads along: not supported yet.
	var forked map[string]any
	err = e.c.Post(ctx, "v1/sessions/"+sid+"/fork", map[string]any{}, &forked)
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 400 || !strings.Contains(apiErr.Error(), "not supported yet") {
		t.Fatalf("fork of a session with threads: %v", err)
	}
	// Archiving a thread terminates it; the primary thread shows it.
	th, err := e.c.Beta.Sessions.Threads.Archive(ctx, ids[0], anthropic.BetaSessionThreadArchiveParams{SessionID: sid})
	if err != nil {
		t.Fatal(err)
	}
	if th.Status != "terminated" || th.ArchivedAt.IsZero() {
		t.Fatalf("archived thread %s", th.RawJSON())
	}
	evs = e.waitFor(t, sid, session.EventThreadStatusTerminated, 1)
	if got := ofKind(evs, session.EventThreadStatusTerminated)[0].SessionThreadID; got != ids[0] {
		t.Fatalf("thread_status_terminated of %s, want %s", got, ids[0])
	}
}

// TestInterruptReachesTheThreads: interrupting a coordinator that waits
// for a thread interrupts the thread too; its answer, cut off, is not
// delivered to the coordinator, and nothing runs on.
func TestInterruptReachesTheThreads(t *testing.T) {
	e := startThreads(t)
	sid := e.coordinator(t, "coord-slow", "slow")
	e.say(t, sid, "go slow")
	evs := e.waitFor(t, sid, session.EventThreadStatusRunning, 1)
	tid := threadIDs(evs)[0]
	e.waitFor(t, sid, "agent.tool_use", 1, tid)
	_, err := e.c.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{
			Type: anthropic.BetaManagedAgentsUserInterruptEventParamsTypeUserInterrupt}}}})
	if err != nil {
		t.Fatal(err)
	}
	tevs := e.waitFor(t, sid, "session.status_idle", 1, tid)
	if len(ofKind(tevs, "user.interrupt")) != 1 {
		t.Fatalf("the thread's log: %v", kinds(tevs))
	}
	evs = e.waitFor(t, sid, session.EventThreadStatusIdle, 1)
	time.Sleep(300 * time.Millisecond) // a wrongly delivered answer would start a turn now
	evs = e.log(t, sid)
	if n := len(ofKind(evs, session.EventThreadMessageReceived)); n != 0 {
		t.Fatalf("an interrupted thread's answer was delivered: %v", kinds(evs))
	}
	if n := len(ofKind(evs, "session.status_running")); n != 1 {
		t.Fatalf("the coordinator ran %d turns: %v", n, kinds(evs))
	}
}

// evText joins the text blocks of an event's content.
func evText(ev anthropic.BetaManagedAgentsSessionEventUnion) string {
	var b struct {
		Content []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		} `json:"content"`
	}
	_ = json.Unmarshal([]byte(ev.RawJSON()), &b)
	var s strings.Builder
	for _, c := range b.Content {
		s.WriteString(c.Text)
	}
	return s.String()
}

// TestThreadWaitingForTheUser: a thread whose tool call needs the user's
// confirmation leaves the coordinator's turn to end (the primary thread
// shows the thread idle, requires_action, naming the call); the user
// confirms the call by its id, the thread runs it and answers, and the
// answer starts a turn of the coordinator.
func TestThreadWaitingForTheUser(t *testing.T) {
	e := startThreads(t)
	ask := []anthropic.BetaAgentNewParamsToolUnion{{OfAgentToolset20260401: &anthropic.BetaManagedAgentsAgentToolset20260401Params{
		Type: anthropic.BetaManagedAgentsAgentToolset20260401ParamsTypeAgentToolset20260401,
		DefaultConfig: anthropic.BetaManagedAgentsAgentToolsetDefaultConfigParams{PermissionPolicy: anthropic.BetaManagedAgentsAgentToolsetDefaultConfigParamsPermissionPolicyUnion{
			OfAlwaysAsk: &anthropic.BetaManagedAgentsAlwaysAskPolicyParam{Type: anthropic.BetaManagedAgentsAlwaysAskPolicyTypeAlwaysAsk}}}}}}
	sid := e.coordinator(t, "coord-ask", "asker", ask...)
	e.say(t, sid, "go")
	evs := e.waitFor(t, sid, "session.status_idle", 1)
	idle := ofKind(evs, session.EventThreadStatusIdle)
	if len(idle) != 1 || idle[0].StopReason.Type != "requires_action" || len(idle[0].StopReason.EventIDs) != 1 {
		t.Fatalf("the thread's idle on the primary thread: %v", kinds(evs))
	}
	if n := len(ofKind(evs, session.EventThreadMessageReceived)); n != 0 {
		t.Fatalf("a thread waiting for the user answered the coordinator: %v", kinds(evs))
	}
	_, err := e.c.Beta.Sessions.Events.Send(context.Background(), sid, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserToolConfirmation: &anthropic.BetaManagedAgentsUserToolConfirmationEventParams{
			Type: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsTypeUserToolConfirmation, ToolUseID: idle[0].StopReason.EventIDs[0],
			Result: anthropic.BetaManagedAgentsUserToolConfirmationEventParamsResultAllow}}}})
	if err != nil {
		t.Fatal(err)
	}
	evs = e.waitFor(t, sid, "session.status_idle", 2)
	received := ofKind(evs, session.EventThreadMessageReceived)
	if len(received) != 1 || evText(received[0]) != "asker done" {
		t.Fatalf("the thread's answer: %v", kinds(evs))
	}
	if msgs := ofKind(evs, "agent.message"); evText(msgs[len(msgs)-1]) != "got the answer" {
		t.Fatalf("the coordinator's answer: %v", kinds(evs))
	}
}

// TestThreadThatFailsStillAnswers: a thread whose turn fails (its model
// route errors) tells the coordinator so, instead of leaving it with
// nothing; the coordinator's turn goes on and ends.
func TestThreadThatFailsStillAnswers(t *testing.T) {
	e := startThreads(t)
	sid := e.coordinator(t, "coord-fail", "failing")
	e.say(t, sid, "go")
	evs := e.waitFor(t, sid, "session.status_idle", 1)
	received := ofKind(evs, session.EventThreadMessageReceived)
	if len(received) != 1 || !strings.Contains(evText(received[0]), "ended its turn without a message") {
		t.Fatalf("the failed thread's answer: %v", kinds(evs))
	}
	if msgs := ofKind(evs, "agent.message"); evText(msgs[len(msgs)-1]) != "noted the failure" {
		t.Fatalf("the coordinator's last message: %v", kinds(evs))
	}
}

// TestThreadsSDKGeneratedCalls makes the calls of the SDK's generated
// betasessionthread_test.go and betasessionthreadevent_test.go, field for
// field, with real ids: threads the runtime opened, real page cursors,
// and the status filter.
func TestThreadsSDKGeneratedCalls(t *testing.T) {
	e := startThreads(t)
	ctx := context.Background()
	sid := e.coordinator(t, "coord", "worker")
	e.say(t, sid, "split the work")
	tid := threadIDs(e.waitFor(t, sid, "session.status_idle", 1))[0]
	betas := []anthropic.AnthropicBeta{anthropic.AnthropicBetaMessageBatches2024_09_24}
	ws := anthropic.String("wrkspc_011CZkZaBF1tNoB5wlCeusgy")

	// TestBetaSessionThreadGetWithOptionalParams
	th, err := e.c.Beta.Sessions.Threads.Get(ctx, tid, anthropic.BetaSessionThreadGetParams{SessionID: sid, Betas: betas, WorkspaceID: ws})
	if err != nil || th.ID != tid || th.Type != "session_thread" {
		t.Fatalf("Get: %v %v", th, err)
	}
	// TestBetaSessionThreadListWithOptionalParams: a real cursor for page
	// (the next page of a first page of one), and the running filter —
	// every thread is idle now, so the page after the primary is empty.
	first, err := e.c.Beta.Sessions.Threads.List(ctx, sid, anthropic.BetaSessionThreadListParams{Limit: anthropic.Int(1)})
	if err != nil || len(first.Data) != 1 || first.NextPage == "" {
		t.Fatalf("first page: %v %v", first, err)
	}
	l, err := e.c.Beta.Sessions.Threads.List(ctx, sid, anthropic.BetaSessionThreadListParams{Limit: anthropic.Int(1), Page: anthropic.String(first.NextPage),
		Statuses: []anthropic.BetaManagedAgentsSessionThreadStatus{anthropic.BetaManagedAgentsSessionThreadStatusRunning}, Betas: betas, WorkspaceID: ws})
	if err != nil || len(l.Data) != 0 {
		t.Fatalf("List running after the primary: %v %v", l, err)
	}
	l, err = e.c.Beta.Sessions.Threads.List(ctx, sid, anthropic.BetaSessionThreadListParams{Page: anthropic.String(first.NextPage),
		Statuses: []anthropic.BetaManagedAgentsSessionThreadStatus{anthropic.BetaManagedAgentsSessionThreadStatusIdle}, Betas: betas, WorkspaceID: ws})
	if err != nil || len(l.Data) != 2 {
		t.Fatalf("List idle after the primary: %v %v", l, err)
	}
	// TestBetaSessionThreadEventListWithOptionalParams
	evFirst, err := e.c.Beta.Sessions.Threads.Events.List(ctx, tid, anthropic.BetaSessionThreadEventListParams{SessionID: sid, Limit: anthropic.Int(1)})
	if err != nil || len(evFirst.Data) != 1 || evFirst.NextPage == "" {
		t.Fatalf("first events page: %v %v", evFirst, err)
	}
	evs, err := e.c.Beta.Sessions.Threads.Events.List(ctx, tid, anthropic.BetaSessionThreadEventListParams{SessionID: sid, Limit: anthropic.Int(1),
		Page: anthropic.String(evFirst.NextPage), Betas: betas, WorkspaceID: ws})
	if err != nil || len(evs.Data) != 1 || evs.Data[0].ID == evFirst.Data[0].ID {
		t.Fatalf("second events page: %v %v", evs, err)
	}
	// TestBetaSessionThreadEventStreamEventsWithOptionalParams: the stream
	// opens, and an interrupt sent to the thread arrives on it.
	sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	stream := e.c.Beta.Sessions.Threads.Events.StreamEvents(sctx, tid, anthropic.BetaSessionThreadEventStreamParams{SessionID: sid, Betas: betas, WorkspaceID: ws})
	defer stream.Close()
	_, err = e.c.Beta.Sessions.Events.Send(ctx, sid, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{
			Type: anthropic.BetaManagedAgentsUserInterruptEventParamsTypeUserInterrupt, SessionThreadID: anthropic.String(tid)}}}})
	if err != nil {
		t.Fatal(err)
	}
	got := false
	for !got && stream.Next() {
		got = stream.Current().Type == "user.interrupt"
	}
	if err := stream.Err(); err != nil || !got {
		t.Fatalf("thread stream: the interrupt did not arrive (%v)", err)
	}
	// TestBetaSessionThreadArchiveWithOptionalParams
	arch, err := e.c.Beta.Sessions.Threads.Archive(ctx, tid, anthropic.BetaSessionThreadArchiveParams{SessionID: sid, Betas: betas, WorkspaceID: ws})
	if err != nil || arch.Status != "terminated" {
		t.Fatalf("Archive: %v %v", arch, err)
	}
}
