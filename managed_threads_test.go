package agentkernel_test

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/daemon/daemontest"
	"github.com/agentkernel/agentkernel/internal/ids"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/store"
)

// newChildThread is a test fixture: the runtime's coordinator opens
// threads, which these tests do not run, so the thread row is written
// straight to the store (a session row with ThreadOf = the parent).
func newChildThread(t *testing.T, d *daemontest.Daemon, parentID, agentID string, agentVersion int64) *store.ManagedSession {
	t.Helper()
	ctx := context.Background()
	parent, err := d.Store().GetManagedSession(ctx, parentID)
	if err != nil {
		t.Fatal(err)
	}
	row, err := d.Store().CreateManagedSession(ctx, &store.ManagedSession{
		ID: ids.New("sthr"), TenantID: parent.TenantID, AgentID: agentID, AgentVersion: agentVersion,
		EnvironmentID: parent.EnvironmentID, Doc: json.RawMessage(`{}`), ThreadOf: parentID,
	})
	if err != nil {
		t.Fatal(err)
	}
	return row
}

func interruptThread(threadID string) anthropic.BetaManagedAgentsEventParamsUnion {
	return anthropic.BetaManagedAgentsEventParamsUnion{OfUserInterrupt: &anthropic.BetaManagedAgentsUserInterruptEventParams{
		Type: anthropic.BetaManagedAgentsUserInterruptEventParamsTypeUserInterrupt, SessionThreadID: anthropic.String(threadID)}}
}

// TestSessionThreadsThroughTheSDK: the SDK's Beta.Sessions.Threads calls
// (get, list, archive, events list and stream) with a real session and a
// real child thread, and user.interrupt's session_thread_id.
func TestSessionThreadsThroughTheSDK(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) { testSessionThreads(t, daemontest.Start(t)) })
	t.Run("postgres", func(t *testing.T) {
		u := freshPostgres(t)
		testSessionThreads(t, daemontest.Start(t, func(c *config.Config) { c.Store.Engine, c.Store.URL = "postgres", u }))
	})
}

func testSessionThreads(t *testing.T, d *daemontest.Daemon) {
	ctx := context.Background()
	c := sdkClient(d, d.AdminKey)
	coord := newAgent(t, c, "coordinator")
	worker := newAgent(t, c, "worker")
	s := newSession(t, c, coord.ID, newEnv(t, c, "e").ID)
	primary := session.PrimaryThreadID(s.ID)
	child := newChildThread(t, d, s.ID, worker.ID, worker.Version)
	child2 := newChildThread(t, d, s.ID, worker.ID, worker.Version)
	threads := c.Beta.Sessions.Threads

	// Get: the primary thread and a child.
	pt, err := threads.Get(ctx, primary, anthropic.BetaSessionThreadGetParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	if pt.ID != primary || pt.Type != "session_thread" || pt.SessionID != s.ID || pt.JSON.ParentThreadID.Valid() ||
		pt.Agent.Type != "agent" || pt.Agent.ID != coord.ID || pt.Agent.Name != "coordinator" || pt.Status != "idle" ||
		pt.JSON.ArchivedAt.Valid() || pt.JSON.WorkflowRunID.Valid() || pt.CreatedAt.IsZero() {
		t.Fatalf("primary thread: %s", pt.RawJSON())
	}
	ct, err := threads.Get(ctx, child.ID, anthropic.BetaSessionThreadGetParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	if ct.ID != child.ID || ct.SessionID != s.ID || ct.ParentThreadID != primary || ct.Agent.ID != worker.ID ||
		ct.Agent.Version != worker.Version || ct.Agent.Name != "worker" || ct.Agent.Model.ID != testModel ||
		ct.Status != "idle" || ct.JSON.Usage.Valid() {
		t.Fatalf("child thread: %s", ct.RawJSON())
	}

	// List: the primary first, then the children oldest first; one per
	// page through the cursor.
	var listed []string
	for th := range threads.ListAutoPaging(ctx, s.ID, anthropic.BetaSessionThreadListParams{Limit: anthropic.Int(1)}).All() {
		listed = append(listed, th.ID)
	}
	if !slices.Equal(listed, []string{primary, child.ID, child2.ID}) {
		t.Fatalf("listed %v, want %v", listed, []string{primary, child.ID, child2.ID})
	}

	// Unknown threads, bad ids, another session's thread, another tenant.
	other := newSession(t, c, coord.ID, newEnv(t, c, "e2").ID)
	for _, id := range []string{"sthr_nope", "not-a-thread", session.PrimaryThreadID(other.ID)} {
		_, err = threads.Get(ctx, id, anthropic.BetaSessionThreadGetParams{SessionID: s.ID})
		wantStatus(t, "thread "+id, err, 404, id)
	}
	_, err = threads.Get(ctx, child.ID, anthropic.BetaSessionThreadGetParams{SessionID: other.ID})
	wantStatus(t, "a thread through another session", err, 404, child.ID)
	_, err = threads.Events.List(ctx, "sthr_nope", anthropic.BetaSessionThreadEventListParams{SessionID: s.ID})
	wantStatus(t, "events of an unknown thread", err, 404, "sthr_nope")
	oc := sdkClient(d, tenantKey(t, d, "other"))
	_, err = oc.Beta.Sessions.Threads.Get(ctx, child.ID, anthropic.BetaSessionThreadGetParams{SessionID: s.ID})
	wantStatus(t, "another tenant's session", err, 404, s.ID)
	_, err = oc.Beta.Sessions.Threads.List(ctx, s.ID, anthropic.BetaSessionThreadListParams{})
	wantStatus(t, "another tenant's threads", err, 404, s.ID)

	// The child's stream is open before the interrupt naming it is sent,
	// and delivers it; the interrupt lands in the child's log, not the
	// session's.
	sctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream := threads.Events.StreamEvents(sctx, child.ID, anthropic.BetaSessionThreadEventStreamParams{SessionID: s.ID})
	defer stream.Close()
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	sent, err := c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{interruptThread(child.ID)}})
	if err != nil {
		t.Fatal(err)
	}
	if len(sent.Data) != 1 || sent.Data[0].Type != "user.interrupt" || sent.Data[0].AsUserInterrupt().SessionThreadID != child.ID {
		t.Fatalf("sent: %s", sent.RawJSON())
	}
	intr := sent.Data[0].ID
	if !stream.Next() {
		t.Fatalf("thread stream ended: %v", stream.Err())
	}
	if ev := stream.Current(); ev.ID != intr || ev.Type != "user.interrupt" {
		t.Fatalf("streamed %s, want the interrupt %s", ev.RawJSON(), intr)
	}
	cancel()
	childEvents := threadEventIDs(t, c, s.ID, child.ID)
	if !slices.Contains(childEvents, intr) {
		t.Fatalf("child's events %v lack the interrupt %s", childEvents, intr)
	}
	sessionEvents := threadEventIDs(t, c, s.ID, primary)
	if slices.Contains(sessionEvents, intr) {
		t.Fatalf("the child's interrupt is in the session's log too: %v", sessionEvents)
	}
	// The primary thread's events are the session's; the child's are its
	// own only.
	all, err := c.Beta.Sessions.Events.List(ctx, s.ID, anthropic.BetaSessionEventListParams{Limit: anthropic.Int(1000)})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range all.Data {
		if slices.Contains(childEvents, ev.ID) {
			t.Fatalf("session event %s listed among the child's", ev.ID)
		}
	}
	if len(all.Data) != len(sessionEvents) {
		t.Fatalf("primary thread lists %d events, the session %d", len(sessionEvents), len(all.Data))
	}
	if n := len(threadEventIDs(t, c, s.ID, child2.ID)); n != 0 {
		t.Fatalf("the other child has %d events", n)
	}
	// One event of a thread's own log (agentkernel's route): found through
	// its thread only, not through the session's log, another thread or
	// another tenant.
	one := "/v1/sessions/" + s.ID + "/threads/" + child.ID + "/events/" + intr
	if code, body := rawCall(t, d, d.AdminKey, http.MethodGet, one, ""); code != http.StatusOK || !strings.Contains(string(body), `"id":"`+intr+`"`) {
		t.Fatalf("GET %s: %d %s", one, code, body)
	}
	for name, tc := range map[string]struct{ key, path string }{
		"through the session's log": {d.AdminKey, "/v1/sessions/" + s.ID + "/events/" + intr},
		"through the primary":       {d.AdminKey, "/v1/sessions/" + s.ID + "/threads/" + primary + "/events/" + intr},
		"through the other child":   {d.AdminKey, "/v1/sessions/" + s.ID + "/threads/" + child2.ID + "/events/" + intr},
		"an unknown thread":         {d.AdminKey, "/v1/sessions/" + s.ID + "/threads/sthr_nope/events/" + intr},
		"another tenant":            {tenantKey(t, d, "other2"), one},
	} {
		if code, body := rawCall(t, d, tc.key, http.MethodGet, tc.path, ""); code != http.StatusNotFound {
			t.Errorf("%s: %d %s", name, code, body)
		}
	}

	// Interrupting the primary thread by its id goes to the session;
	// an unknown or another session's thread is refused, naming the field.
	sent, err = c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{interruptThread(primary)}})
	if err != nil || !slices.Contains(threadEventIDs(t, c, s.ID, primary), sent.Data[0].ID) {
		t.Fatalf("interrupt the primary thread: %v %v", sent, err)
	}
	for _, id := range []string{"sthr_nope", session.PrimaryThreadID(other.ID)} {
		_, err = c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{
			Events: []anthropic.BetaManagedAgentsEventParamsUnion{interruptThread(id)}})
		wantStatus(t, "interrupt thread "+id, err, 404, "session_thread_id", id)
	}
	_, err = c.Beta.Sessions.Events.Send(ctx, other.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{interruptThread(child.ID)}})
	wantStatus(t, "interrupt another session's thread", err, 404, "session_thread_id", child.ID)

	// A custom tool result answering a call in the child's log goes to
	// the child's log (the SDK routes it by custom_tool_use_id).
	use, err := d.Events().Append(ctx, child2.ID, []store.NewEvent{{ID: ids.New("sevt"), Type: "agent.custom_tool_use",
		Data: json.RawMessage(`{"type":"agent.custom_tool_use","name":"lookup","input":{}}`)}})
	if err != nil {
		t.Fatal(err)
	}
	sent, err = c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{{OfUserCustomToolResult: &anthropic.BetaManagedAgentsUserCustomToolResultEventParams{
			Type: "user.custom_tool_result", CustomToolUseID: use[0].ID}}}})
	if err != nil {
		t.Fatal(err)
	}
	if ids := threadEventIDs(t, c, s.ID, child2.ID); !slices.Contains(ids, sent.Data[0].ID) {
		t.Fatalf("the tool result is not in the child's log: %v", ids)
	}

	// Archive: a child is archived and terminated (and stays so when
	// archived again); the primary thread is the session's to archive.
	arch, err := threads.Archive(ctx, child.ID, anthropic.BetaSessionThreadArchiveParams{SessionID: s.ID})
	if err != nil {
		t.Fatal(err)
	}
	if arch.ID != child.ID || arch.ArchivedAt.IsZero() || arch.Status != "terminated" {
		t.Fatalf("archived thread: %s", arch.RawJSON())
	}
	again, err := threads.Archive(ctx, child.ID, anthropic.BetaSessionThreadArchiveParams{SessionID: s.ID})
	if err != nil || !again.ArchivedAt.Equal(arch.ArchivedAt) || !again.UpdatedAt.Equal(arch.UpdatedAt) {
		t.Fatalf("archive again: %v %v", again, err)
	}
	_, err = threads.Archive(ctx, primary, anthropic.BetaSessionThreadArchiveParams{SessionID: s.ID})
	wantStatus(t, "archive the primary thread", err, 400, primary, "archive the session")
	_, err = c.Beta.Sessions.Events.Send(ctx, s.ID, anthropic.BetaSessionEventSendParams{
		Events: []anthropic.BetaManagedAgentsEventParamsUnion{interruptThread(child.ID)}})
	wantStatus(t, "interrupt an archived thread", err, 409, "session_thread_id", "archived")

	// The statuses filter (sent as statuses[]=…).
	filtered := func(sts ...anthropic.BetaManagedAgentsSessionThreadStatus) []string {
		t.Helper()
		l, err := threads.List(ctx, s.ID, anthropic.BetaSessionThreadListParams{Statuses: sts})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, th := range l.Data {
			out = append(out, th.ID)
		}
		return out
	}
	waitFor(t, "child2 idle", func() bool { return slices.Contains(filtered("idle"), child2.ID) })
	if got := filtered("terminated"); !slices.Equal(got, []string{child.ID}) {
		t.Fatalf("terminated threads: %v, want %v", got, []string{child.ID})
	}
	if got := filtered("terminated", "idle"); len(got) != 3 {
		t.Fatalf("terminated or idle threads: %v", got)
	}
	_, err = threads.List(ctx, s.ID, anthropic.BetaSessionThreadListParams{Statuses: []anthropic.BetaManagedAgentsSessionThreadStatus{"bogus"}})
	wantStatus(t, "unknown status", err, 400, "statuses", "bogus")
}

func threadEventIDs(t *testing.T, c anthropic.Client, sessionID, threadID string) []string {
	t.Helper()
	var out []string
	for ev := range c.Beta.Sessions.Threads.Events.ListAutoPaging(context.Background(), threadID,
		anthropic.BetaSessionThreadEventListParams{SessionID: sessionID, Limit: anthropic.Int(2)}).All() {
		out = append(out, ev.ID)
	}
	return out
}

func waitFor(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
