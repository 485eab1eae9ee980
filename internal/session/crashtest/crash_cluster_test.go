package crashtest

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/model/anthropictest"
	"github.com/agentkernel/agentkernel/internal/session"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

// Sessions on several daemons (issue 16): three serve nodes share one
// PostgreSQL store and one S3 blob store. A session's turns run at the
// node holding its lease; every other node forwards its requests there.

// clusterLease is the test cluster's lease period: short, so a failover
// takes seconds.
const clusterLease = 2 * time.Second

// newCluster starts n serve nodes on one fresh database and one S3
// prefix, with the fake model at modelURL; each reaches the database
// through a proxy of its own (node.proxy), so a test can cut it off. At cleanup every node runs
// again and the sandboxes of all of them are destroyed while all of them
// run (a node forwards a sandbox's destruction to the node running it).
func newCluster(t *testing.T, n int, modelURL string) []*node {
	t.Helper()
	testenv.PostgresURL(t)
	s3 := testenv.S3(t)
	db := freshDatabase(t)
	prefix := fmt.Sprintf("sessions-cluster-%d/", time.Now().UnixNano())
	var nodes []*node
	dbURL, err := url.Parse(db)
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		// The proxy first: its cleanup then runs after the node's, which
		// starts the node again to destroy its sandboxes.
		proxy := testenv.NewTCPProxy(t, dbURL.Host)
		nd := newNode(t, "sqlite", modelURL)
		nd.proxy = proxy
		viaProxy := *dbURL
		viaProxy.Host = nd.proxy.Addr
		nd.appendConf(s3.SharedStoresTOML(viaProxy.String(), prefix) + fmt.Sprintf(`
[cluster]
node = "n%d"
advertise = %q
lease_ttl = %q
`, i+1, nd.url(), clusterLease))
		nodes = append(nodes, nd)
	}
	// Registered after the nodes' own cleanups, so it runs before them.
	t.Cleanup(func() {
		for _, nd := range nodes {
			nd.proxy.Heal()
			if nd.cmd == nil {
				nd.start()
			}
		}
		for _, nd := range nodes {
			testenv.DestroySandboxes(t, nd.url(), nd.key)
		}
		for _, nd := range nodes {
			nd.stop()
		}
	})
	// The first node makes the admin key in the shared store; the others
	// find it in their homes, as an operator would put it there.
	nodes[0].start()
	key, err := os.ReadFile(filepath.Join(nodes[0].home, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes[1:] {
		if err := os.WriteFile(filepath.Join(nd.home, "admin.key"), key, 0o600); err != nil {
			t.Fatal(err)
		}
		nd.start()
	}
	return nodes
}

// clusterModel: two bash calls that each append a line to one file and
// print it, then an answer.
func clusterModel(r anthropictest.Request) anthropictest.Turn {
	results := 0
	for _, b := range r.AllBlocks() {
		if b.Type == "tool_result" {
			results++
		}
	}
	switch results {
	case 0:
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo one >> /workspace/out; cat /workspace/out"}}}}
	case 1:
		return anthropictest.Turn{ToolUses: []anthropictest.ToolUse{{Name: "bash", Input: map[string]any{"command": "echo two >> /workspace/out; cat /workspace/out"}}}}
	}
	return anthropictest.Turn{Text: "Finished."}
}

// TestClusterSessionSurvivesItsOwnersKill: the node running a session's
// turn is killed -9 between two tool calls. A client following the
// event stream through another node keeps following it; a survivor
// takes the session over once the lease lapses, continues the turn in a
// sandbox of its own seeded from the last checkpoint's workspace (the
// first call's line is there), and each command ran once. When the
// killed node comes back it destroys the sandbox it ran for the session.
func TestClusterSessionSurvivesItsOwnersKill(t *testing.T) {
	fake := anthropictest.New(t, clusterModel)
	nodes := newCluster(t, 3, fake.URL)
	for _, nd := range nodes {
		nd.arm(session.FailAfterToolResult)
	}
	c := nodes[0].client()
	// n1 takes the session (the first node asked about it); a client
	// follows its stream through n3, and the message goes through n2:
	// both are forwarded to n1.
	sid := sessionOfFirstNode(t, nodes[0])
	var cur atomic.Pointer[[2]string]
	cur.Store(&[2]string{nodes[2].url(), nodes[2].key})
	sse := followSSE(func() (string, string) { p := cur.Load(); return p[0], p[1] }, sid)
	defer close(sse.stop)
	<-sse.connected
	send(t, nodes[1].client(), sid, "go")
	owner := reachedAt(t, nodes, session.FailAfterToolResult)
	if owner != nodes[0] {
		t.Fatalf("the turn runs at %s, not at n1 which owns the session", nodeName(owner, nodes))
	}
	survivors := nodes[1:]
	for _, nd := range survivors {
		nd.disarm(session.FailAfterToolResult)
	}
	oldSandbox := sessionSandbox(t, owner, sid)
	// The stream through n3 delivers what n1 stored so far.
	before := sse.until(len(events(t, c, sid)), 30*time.Second)

	owner.kill()
	killed := time.Now()
	awaitTakeover(t, survivors[0], sid, killed)
	c = survivors[0].client()
	evs := waitIdle(t, survivors[0], c, sid, 1)
	checkTrajectory(t, evs)
	var results []string
	for _, e := range ofType(evs, "agent.tool_result") {
		results = append(results, strings.TrimSpace(e.text()))
	}
	if !slices.Equal(results, []string{"one", "one\ntwo"}) {
		t.Fatalf("tool results %q: want the first call's line once, then both lines (the workspace moved with the session)\nevents %v",
			results, types(evs))
	}
	resched := ofType(evs, "session.status_rescheduled")
	if len(resched) != 1 {
		t.Fatalf("want one session.status_rescheduled: %v", types(evs))
	}
	var at struct {
		ProcessedAt time.Time `json:"processed_at"`
	}
	if err := json.Unmarshal([]byte(resched[0].Raw), &at); err != nil {
		t.Fatal(err)
	}
	t.Logf("the turn was resumed %.2fs after its owner's kill", at.ProcessedAt.Sub(killed).Seconds())
	if msgs := ofType(evs, "agent.message"); len(msgs) != 1 || msgs[0].text() != "Finished." {
		t.Fatalf("agent messages %v", msgs)
	}
	served := servedBy(t, survivors[1], "/v1/sessions/"+sid)
	if served == "" || served == nodeName(owner, nodes) {
		t.Fatalf("the session is served by %q after its owner %s died", served, nodeName(owner, nodes))
	}

	want := make([]string, len(evs))
	for i, e := range evs {
		want[i] = e.ID
	}
	got := append(before, sse.until(len(want)-len(before), 30*time.Second)...)
	if !slices.Equal(got, want) {
		t.Fatalf("the stream through %s saw %d events, the session has %d:\n got %v\nwant %v",
			nodeName(survivors[1], nodes), len(got), len(want), got, want)
	}

	// The killed node comes back: the session is not its any more, and
	// the sandbox it ran for it goes.
	owner.start()
	awaitSandboxGone(t, owner, oldSandbox, "after the killed node came back")
}

// awaitSandboxGone waits (30s at most) until nd has destroyed its sandbox
// sbx: its directory is gone.
func awaitSandboxGone(t *testing.T, nd *node, sbx, when string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := os.Stat(filepath.Join(nd.home, "sandboxes", sbx)); os.IsNotExist(err) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, the node still has the session's old sandbox %s\n%s", when, sbx, nd.logs())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// sessionOfFirstNode makes a session through n1, which takes its lease
// (the first node asked about a session does).
func sessionOfFirstNode(t *testing.T, n1 *node) string {
	t.Helper()
	sid := newSession(t, n1.client())
	if by := servedBy(t, n1, "/v1/sessions/"+sid); by != "n1" {
		t.Fatalf("the session's first request was served by %q", by)
	}
	return sid
}

// awaitTakeover waits until a survivor serves the session after its
// owner's kill: until the dead node's lease lapses, the session's
// requests answer 502 (its owner is unreachable).
func awaitTakeover(t *testing.T, survivor *node, sid string, killed time.Time) {
	t.Helper()
	for servedBy(t, survivor, "/v1/sessions/"+sid) == "" {
		if time.Since(killed) > time.Minute {
			t.Fatal("no survivor took the session over")
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("a survivor serves the session %.2fs after its owner was lost (killed or cut off; lease period %s)", time.Since(killed).Seconds(), clusterLease)
}

// TestClusterToolRunningWhenItsOwnerDies: the session's owner is killed
// -9 while a bash call runs in its sandbox. The survivor that takes the
// session over cannot ask that sandbox's guest whether the call ran (it
// is on the dead node), so the model is told it may have run — it is
// never run again in the new sandbox.
func TestClusterToolRunningWhenItsOwnerDies(t *testing.T) {
	fake := anthropictest.New(t, longToolModel)
	nodes := newCluster(t, 2, fake.URL)
	n1, n2 := nodes[0], nodes[1]
	c := n1.client()
	sid := sessionOfFirstNode(t, n1)
	send(t, c, sid, "go")
	sbx := waitToolStarted(t, n1)
	n1.kill()
	if _, err := os.Stat(filepath.Join(sbx, "workspace", "out")); err == nil {
		t.Fatal("the command finished before the kill: the test did not kill mid-call")
	}
	awaitTakeover(t, n2, sid, time.Now())
	evs := waitIdle(t, n2, n2.client(), sid, 1)
	checkTrajectory(t, evs)
	results := ofType(evs, "agent.tool_result")
	if len(results) != 1 || !strings.Contains(results[0].text(), "may have executed; verify before retrying") ||
		!strings.Contains(results[0].Raw, `"is_error":true`) {
		t.Fatalf("tool results %v: want the call reported as may-have-executed\n%s", results, n2.logs())
	}
	if m, _ := filepath.Glob(filepath.Join(n2.home, "sandboxes", "*", "workspace", "started")); len(m) != 0 {
		t.Fatalf("the call ran again at the node that took the session over: %v", m)
	}
}

// reachedAt waits until a node's turn hangs at failpoint and returns
// that node.
func reachedAt(t *testing.T, nodes []*node, failpoint string) *node {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		for _, nd := range nodes {
			if _, err := os.Stat(nd.flag(failpoint) + ".reached"); err == nil {
				return nd
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node reached failpoint %s", failpoint)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// sessionSandbox is the id of the one sandbox nd runs, the session's.
func sessionSandbox(t *testing.T, nd *node, sid string) string {
	t.Helper()
	m, _ := filepath.Glob(filepath.Join(nd.home, "sandboxes", "*", "workspace", "out"))
	if len(m) != 1 {
		t.Fatalf("session %s: %d sandboxes with its file at its owner", sid, len(m))
	}
	return filepath.Base(filepath.Dir(filepath.Dir(m[0])))
}

// servedBy is the node that served a GET of path through nd; "" when the
// answer was a 502 or 503 (the owner is unreachable or moving).
func servedBy(t *testing.T, nd *node, path string) string {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodGet, nd.url()+path, nil)
	req.Header.Set("x-api-key", nd.key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
		return resp.Header.Get("X-Agentkernel-Node")
	case http.StatusBadGateway, http.StatusServiceUnavailable:
		return ""
	}
	t.Fatalf("GET %s: %s", path, resp.Status)
	return ""
}

func nodeName(nd *node, nodes []*node) string {
	return fmt.Sprintf("n%d", slices.Index(nodes, nd)+1)
}

// TestClusterPartitionedOwnerDropsItsSandbox: the node that owns a session
// is cut off from the store for longer than the lease; another node takes
// the session over. When the partition heals, the cut-off node learns at
// its next lease renewal that the session is not its own any more and
// destroys the sandbox it ran for it, without a restart; the session is
// served by its new owner, through the healed node too.
func TestClusterPartitionedOwnerDropsItsSandbox(t *testing.T) {
	fake := anthropictest.New(t, clusterModel)
	nodes := newCluster(t, 3, fake.URL)
	n1, n2 := nodes[0], nodes[1]
	c := n1.client()
	sid := sessionOfFirstNode(t, n1)
	send(t, c, sid, "go")
	waitIdle(t, n1, c, sid, 1)
	sbx := sessionSandbox(t, n1, sid)

	n1.proxy.Partition()
	cut := time.Now()
	awaitTakeover(t, n2, sid, cut)
	owner := servedBy(t, n2, "/v1/sessions/"+sid)
	if owner == "n1" {
		t.Fatal("the cut-off node still serves the session")
	}
	if _, err := os.Stat(filepath.Join(n1.home, "sandboxes", sbx)); err != nil {
		t.Fatalf("the cut-off node's sandbox %s is gone before the partition healed: %v", sbx, err)
	}

	n1.proxy.Heal()
	healed := time.Now()
	awaitSandboxGone(t, n1, sbx, "30s after the partition healed")
	t.Logf("the healed node destroyed the session's old sandbox %.2fs after the partition healed (lease period %s)", time.Since(healed).Seconds(), clusterLease)
	if by := servedBy(t, n1, "/v1/sessions/"+sid); by != owner {
		t.Fatalf("through the healed n1 the session is served by %q, want its new owner %s", by, owner)
	}
}

// TestClusterCutOffOwnerRunsNoToolCall: a session's owner has journalled a
// tool call and is about to run it when it is cut off from the store;
// another node takes the session over and reports the call as possibly
// run. When the cut heals and the cut-off node goes on, it does not run
// the call in its sandbox: its side effects would come on top of whatever
// the new owner does.
func TestClusterCutOffOwnerRunsNoToolCall(t *testing.T) {
	fake := anthropictest.New(t, clusterModel)
	nodes := newCluster(t, 2, fake.URL)
	n1, n2 := nodes[0], nodes[1]
	sid := sessionOfFirstNode(t, n1)
	n1.pause(session.FailBeforeToolExec)
	send(t, n1.client(), sid, "go")
	n1.waitReached(session.FailBeforeToolExec)
	boxes, _ := filepath.Glob(filepath.Join(n1.home, "sandboxes", "*", "workspace"))
	if len(boxes) != 1 {
		t.Fatalf("n1 runs %d sandboxes, want the session's one", len(boxes))
	}
	out := filepath.Join(boxes[0], "out")

	n1.proxy.Partition()
	awaitTakeover(t, n2, sid, time.Now())
	evs := waitIdle(t, n2, n2.client(), sid, 1)
	results := ofType(evs, "agent.tool_result")
	if len(results) == 0 || !strings.Contains(results[0].text(), "may have executed") {
		t.Fatalf("the new owner's first tool result %v: want the call n1 journalled reported as possibly run", results)
	}

	// The cut heals and n1 goes on at once, before its next lease renewal
	// tells it the session moved: it must not run the call (the store is
	// reachable again, so nothing else stops it).
	n1.proxy.Heal()
	n1.disarm(session.FailBeforeToolExec)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(n1.logs(), "its tool call is not run here") {
		if _, err := os.Stat(out); err == nil {
			t.Fatalf("the cut-off node ran the tool call after another node took the session over (%s exists)", out)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the cut-off node neither ran the call nor refused it in 30s\n%s", n1.logs())
		}
		time.Sleep(20 * time.Millisecond)
	}
	if _, err := os.Stat(out); err == nil {
		t.Fatalf("the cut-off node ran the tool call (%s exists)", out)
	}
}
