package object_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentkernel/agentkernel/internal/testenv"
)

// Several daemons on one PostgreSQL and one S3 server (issue 16): three
// `agentkernel serve` processes with their own homes and ports. Each
// reaches PostgreSQL through a TCP proxy of the test's, so the test can
// cut one node off the store (a partition) and heal it.

// clusterLease is the lease period of the test clusters: short, so
// failover takes seconds.
const clusterLease = 2 * time.Second

type clusterNode struct {
	name, home, config, addr, url string
	proxy                         *testenv.TCPProxy
	cmd                           *exec.Cmd
	stderr                        *bytes.Buffer
}

type clusterEnv struct {
	bin, run, key, pg string
	nodes             []*clusterNode
}

// clusterOpts varies a test cluster for the benchmarks: another lease
// period, more [[objects]] classes, or no [cluster] section at all.
type clusterOpts struct {
	// leaseTTL is the lease period; clusterLease when zero.
	leaseTTL time.Duration
	// classes returns more TOML for each node's config (more [[objects]]),
	// given the test app's directory.
	classes func(app string) string
	// single: no [cluster] section, a plain daemon on the same PostgreSQL
	// and S3 (n must be 1).
	single bool
}

func newClusterEnv(t *testing.T, n int) *clusterEnv {
	t.Helper()
	return newClusterEnvOpts(t, n, clusterOpts{})
}

func newClusterEnvOpts(t *testing.T, n int, opts clusterOpts) *clusterEnv {
	t.Helper()
	if opts.leaseTTL == 0 {
		opts.leaseTTL = clusterLease
	}
	_, app := builds(t)
	bin := agentkernelBinary(t)
	pg := testenv.FreshPostgres(t, "akcluster")
	s3 := testenv.S3(t)
	pgURL, err := url.Parse(pg)
	if err != nil {
		t.Fatal(err)
	}
	run, err := os.MkdirTemp("", "akcl")
	if err != nil {
		t.Fatal(err)
	}
	e := &clusterEnv{bin: bin, run: run, pg: pg}
	prefix := fmt.Sprintf("cluster-%d/", time.Now().UnixNano())
	for i := range n {
		nd := &clusterNode{name: fmt.Sprintf("n%d", i+1), home: t.TempDir(), proxy: testenv.NewTCPProxy(t, pgURL.Host)}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nd.addr = ln.Addr().String()
		ln.Close()
		nd.url = "http://" + nd.addr
		viaProxy := *pgURL
		viaProxy.Host = nd.proxy.Addr
		nd.config = filepath.Join(nd.home, "agentkernel.toml")
		clusterTOML := fmt.Sprintf(`
[cluster]
node = %q
advertise = %q
lease_ttl = %q
`, nd.name, nd.url, opts.leaseTTL.String())
		if opts.single {
			clusterTOML = ""
		}
		toml := s3.SharedStoresTOML(viaProxy.String(), prefix) + clusterTOML + fmt.Sprintf(`
[sandbox]
run_dir = %q
guest_binary = %q

[durable_objects]
alarm_poll_interval = "100ms"
app_roots = [%q]

[[objects]]
class = "wcounter"
init_command = ["/app/counter"]
app_dir = %q
storage_mode = "write-through"
`, filepath.Join(run, nd.name), bin, app, app)
		if opts.classes != nil {
			toml += opts.classes(app)
		}
		if err := os.WriteFile(nd.config, []byte(toml), 0o644); err != nil {
			t.Fatal(err)
		}
		e.nodes = append(e.nodes, nd)
	}
	// Sandboxes outlive a SIGKILLed daemon by design: at the end every
	// node runs again, the objects are deleted and every sandbox left is
	// destroyed through the node that runs it.
	t.Cleanup(func() {
		defer os.RemoveAll(run)
		for _, nd := range e.nodes {
			nd.proxy.Heal()
			if nd.cmd == nil {
				e.start(t, nd)
			}
		}
		ctx := context.Background()
		var objs struct {
			Data []struct{ Class, ID string }
		}
		if err := e.do(ctx, e.nodes[0], "GET", "/v1/objects", nil, &objs); err == nil {
			for _, o := range objs.Data {
				_ = e.do(ctx, e.nodes[0], "DELETE", "/v1/objects/"+o.Class+"/"+o.ID, nil, nil)
			}
		}
		for _, nd := range e.nodes {
			testenv.DestroySandboxes(t, nd.url, e.key)
		}
		for _, nd := range e.nodes {
			_ = nd.cmd.Process.Signal(syscall.SIGTERM)
			_ = nd.cmd.Wait()
		}
	})
	for _, nd := range e.nodes {
		e.start(t, nd)
	}
	return e
}

func (e *clusterEnv) start(t *testing.T, nd *clusterNode) {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(e.bin, "serve", "--config", nd.config, "--home", nd.home, "--listen", nd.addr)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTKERNEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		resp, err := http.Get(nd.url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("node %s did not become healthy:\n%s", nd.name, stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	nd.cmd, nd.stderr = cmd, &stderr
	if e.key == "" {
		// The first node made the admin key; the others share it.
		key, err := os.ReadFile(filepath.Join(nd.home, "admin.key"))
		if err != nil {
			t.Fatal(err)
		}
		e.key = strings.TrimSpace(string(key))
	}
}

func (e *clusterEnv) kill(t *testing.T, nd *clusterNode) {
	t.Helper()
	if err := nd.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = nd.cmd.Wait()
	nd.cmd = nil
}

// do sends one API request to a node.
func (e *clusterEnv) do(ctx context.Context, nd *clusterNode, method, path string, body, out any) error {
	_, _, err := e.doNode(ctx, nd, method, path, body, out)
	return err
}

// doNode sends one API request and returns the status and the node that
// served it.
func (e *clusterEnv) doNode(ctx context.Context, nd *clusterNode, method, path string, body, out any) (int, string, error) {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, nd.url+path, rd)
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("x-api-key", e.key)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	served := resp.Header.Get("X-Agentkernel-Node")
	if resp.StatusCode/100 != 2 {
		return resp.StatusCode, served, fmt.Errorf("%s %s at %s: %d %s", method, path, nd.name, resp.StatusCode, b)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, served, fmt.Errorf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode, served, nil
}

// increment calls wcounter id's increment at nd: the value it answered and
// the node that ran it.
func (e *clusterEnv) increment(ctx context.Context, nd *clusterNode, id string) (int64, string, error) {
	var out struct {
		Result struct{ Value int64 }
	}
	_, served, err := e.doNode(ctx, nd, "POST", "/v1/objects/wcounter/"+id+"/call", map[string]any{"method": "increment"}, &out)
	return out.Result.Value, served, err
}

// storedCount reads the object's persisted count straight from the store.
func storedCount(t *testing.T, e *clusterEnv, id string) int64 {
	t.Helper()
	var out struct {
		Storage map[string]json.RawMessage
	}
	if err := e.do(context.Background(), e.nodes[len(e.nodes)-1], "GET", "/v1/objects/wcounter/"+id, nil, &out); err != nil {
		t.Fatal(err)
	}
	var n int64
	_ = json.Unmarshal(out.Storage["count"], &n)
	return n
}

// leaseOf reads a wcounter object's lease row: its holder and token.
func (e *clusterEnv) leaseOf(t *testing.T, id string) (node string, token int64) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, e.pg)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	err = conn.QueryRow(ctx, `SELECT node, token FROM leases WHERE resource LIKE 'object/%/wcounter/' || $1`, id).Scan(&node, &token)
	if errors.Is(err, pgx.ErrNoRows) {
		return "", 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return node, token
}

// An object is served by one node, whichever node a call reaches: the
// first node asked takes it, the others forward to it, and its count goes
// on without a gap. A sandbox is reached through any node too.
func TestClusterServesEachObjectAtOneNode(t *testing.T) {
	e := newClusterEnv(t, 3)
	ctx := context.Background()
	n1, n2, n3 := e.nodes[0], e.nodes[1], e.nodes[2]
	want := int64(0)
	for i, nd := range []*clusterNode{n2, n1, n3, n2, n3, n1} {
		v, served, err := e.increment(ctx, nd, "a")
		if err != nil {
			t.Fatal(err)
		}
		want++
		if v != want || served != "n2" {
			t.Fatalf("call %d at %s: value %d served by %q; want %d served by n2 (the first node asked)", i, nd.name, v, served, want)
		}
	}
	if node, tok := e.leaseOf(t, "a"); node != "n2" || tok <= 0 {
		t.Fatalf("lease of a: %q token %d; want n2", node, tok)
	}
	// Another object starts where it is first asked for.
	if _, served, err := e.increment(ctx, n3, "b"); err != nil || served != "n3" {
		t.Fatalf("b at n3: served %q, %v", served, err)
	}
	// Deleting through a node that does not own it deletes it at the owner,
	// and the lease goes with it.
	if err := e.do(ctx, n1, "DELETE", "/v1/objects/wcounter/a", nil, nil); err != nil {
		t.Fatal(err)
	}
	if node, _ := e.leaseOf(t, "a"); node != "" {
		t.Fatalf("lease of deleted a still held by %s", node)
	}
	if v, _, err := e.increment(ctx, n1, "a"); err != nil || v != 1 {
		t.Fatalf("a after delete: %d, %v; want 1 (a new object)", v, err)
	}

	// A sandbox runs on the node that created it; every node reaches it.
	var sb struct{ ID string }
	if err := e.do(ctx, n1, "POST", "/v1/sandboxes", map[string]any{}, &sb); err != nil {
		t.Fatal(err)
	}
	var res struct {
		Stdout   string
		ExitCode int `json:"exit_code"`
	}
	status, served, err := e.doNode(ctx, n3, "POST", "/v1/sandboxes/"+sb.ID+"/exec", map[string]any{"command": "echo hi > f; cat f"}, &res)
	if err != nil || strings.TrimSpace(res.Stdout) != "hi" || served != "n1" {
		t.Fatalf("exec through n3: %d %q served by %q, %v", status, res.Stdout, served, err)
	}
	if err := e.do(ctx, n2, "DELETE", "/v1/sandboxes/"+sb.ID, nil, nil); err != nil {
		t.Fatal(err)
	}
}

// Kill -9 of the node that owns an object while calls reach it through the
// other nodes: a survivor takes the object over once the lease lapses and
// goes on from the persisted storage. No acknowledged increment is lost
// (every value answered after the kill is above every value answered
// before) and none is applied twice (no value is answered twice).
func TestClusterNodeKilledMidCallLosesNoAcknowledgedWrite(t *testing.T) {
	e := newClusterEnv(t, 3)
	ctx := context.Background()
	n1 := e.nodes[0]
	if _, served, err := e.increment(ctx, n1, "k"); err != nil || served != "n1" {
		t.Fatalf("first call: served %q, %v", served, err)
	}
	_, tok1 := e.leaseOf(t, "k")
	var obj struct {
		SandboxID string `json:"sandbox_id"`
	}
	if err := e.do(ctx, n1, "GET", "/v1/objects/wcounter/k", nil, &obj); err != nil {
		t.Fatal(err)
	}
	var (
		mu               sync.Mutex
		before, after    []int64
		killed           bool
		killAt, firstOK  time.Time
		afterBy          = map[string]int{}
		wg               sync.WaitGroup
		stop             = make(chan struct{})
		warm             = make(chan struct{}, 2)
		done             = make(chan struct{}, 2)
		acksBeforeReport = 3
	)
	for _, nd := range e.nodes[1:] {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, m := 0, 0
			for {
				select {
				case <-stop:
					return
				default:
				}
				v, served, err := e.increment(ctx, nd, "k")
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				mu.Lock()
				if !killed {
					before = append(before, v)
					n++
					if n == acksBeforeReport {
						warm <- struct{}{}
					}
				} else {
					if firstOK.IsZero() {
						firstOK = time.Now()
					}
					after = append(after, v)
					afterBy[served]++
					m++
					if m == 5 {
						done <- struct{}{}
					}
				}
				mu.Unlock()
			}
		}()
	}
	<-warm
	<-warm
	mu.Lock()
	killed, killAt = true, time.Now()
	mu.Unlock()
	e.kill(t, n1)
	timeout := time.After(2 * time.Minute)
	for range 2 {
		select {
		case <-done:
		case <-timeout:
			t.Fatal("no survivor served the object after the kill")
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("failover: first call answered %v after the kill (lease %v)", firstOK.Sub(killAt), clusterLease)
	seen := map[int64]bool{1: true}
	var maxBefore int64 = 1
	for _, v := range before {
		if seen[v] {
			t.Fatalf("value %d answered twice: an increment was applied twice or lost", v)
		}
		seen[v] = true
		maxBefore = max(maxBefore, v)
	}
	for _, v := range after {
		if seen[v] {
			t.Fatalf("value %d answered twice: an increment was applied twice or lost", v)
		}
		seen[v] = true
		if v <= maxBefore {
			t.Fatalf("after the kill the count went back to %d; %d was acknowledged before it", v, maxBefore)
		}
	}
	if afterBy["n1"] > 0 || len(afterBy) == 0 {
		t.Fatalf("served after the kill by %v", afterBy)
	}
	node, tok := e.leaseOf(t, "k")
	if node == "n1" || tok <= tok1 {
		t.Fatalf("lease after failover: %s token %d (was n1 token %d)", node, tok, tok1)
	}
	// The killed node comes back: the object stays with the survivor, and
	// the killed node destroys the sandbox it ran the object in.
	e.start(t, n1)
	var sb struct{ State string }
	if err := e.do(ctx, e.nodes[1], "GET", "/v1/sandboxes/"+obj.SandboxID, nil, &sb); err != nil {
		t.Fatal(err)
	}
	if sb.State != "destroyed" {
		t.Fatalf("the killed node's sandbox of k is %s after its restart; want destroyed", sb.State)
	}
	if v, served, err := e.increment(ctx, n1, "k"); err != nil || served != node || v <= maxOf(after) {
		t.Fatalf("after restart: %d served by %q, %v; want above %d by %s", v, served, err, maxOf(after), node)
	}
}

func maxOf(vs []int64) int64 {
	var m int64
	for _, v := range vs {
		m = max(m, v)
	}
	return m
}

// A node cut off from the store stops acting once its lease lapses; a
// survivor takes its object over; and the call the cut-off node was
// running when it lost the object never lands (the store refuses its
// stale fencing token, or the node drops the object when it learns).
// After the partition heals, every node forwards to the new owner.
func TestClusterPartitionedNodeIsFenced(t *testing.T) {
	e := newClusterEnv(t, 3)
	ctx := context.Background()
	n1, n2, n3 := e.nodes[0], e.nodes[1], e.nodes[2]
	if v, served, err := e.increment(ctx, n1, "p"); err != nil || v != 1 || served != "n1" {
		t.Fatalf("first call: %d by %q, %v", v, served, err)
	}
	// A slow increment at n1 that outlives n1's lease.
	slow := make(chan error, 1)
	go func() {
		slow <- e.do(ctx, n1, "POST", "/v1/objects/wcounter/p/call", map[string]any{"method": "slow", "args": map[string]any{"ms": (4 * clusterLease).Milliseconds()}}, nil)
	}()
	time.Sleep(300 * time.Millisecond)
	n1.proxy.Partition()
	// What n1 cannot answer without the store is a 503 to retry, not an
	// internal error.
	if code, _, err := e.doNode(ctx, n1, "GET", "/v1/sessions", nil, nil); code != http.StatusServiceUnavailable || !strings.Contains(err.Error(), "the store is unreachable") {
		t.Fatalf("GET /v1/sessions at the cut-off n1: %d %v; want a 503 naming the store", code, err)
	}
	var v int64
	var served string
	deadline := time.Now().Add(time.Minute)
	for {
		// Short attempts: one forwarded to the cut-off node waits behind
		// its slow call until it gives up.
		actx, cancel := context.WithTimeout(ctx, clusterLease/2)
		var err error
		v, served, err = e.increment(actx, n2, "p")
		cancel()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no node took p over from the cut-off n1: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if served == "n1" || v != 2 {
		t.Fatalf("after the partition: %d served by %q; want 2 by n2 or n3", v, served)
	}
	n1.proxy.Heal()
	if err := <-slow; err == nil {
		t.Fatal("the cut-off node's slow call succeeded after another node took the object over")
	} else {
		t.Logf("the cut-off node's call: %v", err)
	}
	// The stale node never wrote: the count is what the new owner answered.
	if got := storedCount(t, e, "p"); got != 2 {
		t.Fatalf("stored count %d; want 2 (the cut-off node's write must be refused)", got)
	}
	// Healed, n1 forwards to the new owner (it may need a renewal to learn
	// it lost the object).
	deadline = time.Now().Add(30 * time.Second)
	for {
		v3, by, err := e.increment(ctx, n1, "p")
		if err == nil {
			if by != served || v3 != 3 {
				t.Fatalf("healed n1: %d served by %q; want 3 by %s", v3, by, served)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("healed n1 never reached the owner: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if v4, by, err := e.increment(ctx, n3, "p"); err != nil || v4 != 4 || by != served {
		t.Fatalf("n3: %d by %q, %v", v4, by, err)
	}
}

// Alarms fire once with three nodes polling, and an alarm of a killed
// node's object fires once at the survivor that takes it over.
func TestClusterAlarmsFireOnce(t *testing.T) {
	e := newClusterEnv(t, 3)
	ctx := context.Background()
	n1, n3 := e.nodes[0], e.nodes[2]
	if _, _, err := e.increment(ctx, n1, "al"); err != nil {
		t.Fatal(err)
	}
	setAlarm := func(nd *clusterNode, tag string, in time.Duration) {
		t.Helper()
		if err := e.do(ctx, nd, "POST", "/v1/objects/wcounter/al/alarms", map[string]any{"method": "alarm", "args": map[string]any{"tag": tag},
			"fire_at": time.Now().Add(in).UTC().Format(time.RFC3339Nano)}, nil); err != nil {
			t.Fatal(err)
		}
	}
	deliveries := func() []map[string]any {
		t.Helper()
		var out struct {
			Storage map[string]json.RawMessage
		}
		if err := e.do(ctx, n3, "GET", "/v1/objects/wcounter/al", nil, &out); err != nil {
			return nil // its owner died: the object moves within the lease period
		}
		var d []map[string]any
		_ = json.Unmarshal(out.Storage["alarm_deliveries"], &d)
		return d
	}
	waitFor := func(n int) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for len(deliveries()) < n {
			if time.Now().After(deadline) {
				t.Fatalf("alarm deliveries %v; want %d", deliveries(), n)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	setAlarm(n3, "first", 300*time.Millisecond)
	waitFor(1)
	setAlarm(n3, "second", clusterLease/2)
	e.kill(t, n1)
	waitFor(2)
	// Time for a second delivery to show, were there one.
	time.Sleep(clusterLease)
	d := deliveries()
	for d == nil {
		time.Sleep(100 * time.Millisecond)
		d = deliveries()
	}
	if len(d) != 2 || d[0]["tag"] != "first" || d[1]["tag"] != "second" {
		t.Fatalf("deliveries %v; want first then second, once each", d)
	}
}

// ccounterClass is a class-mode class (isolation = "class") of the test
// app, for clusterOpts.classes.
func ccounterClass(app string) string {
	return fmt.Sprintf(`
[[objects]]
class = "ccounter"
init_command = ["/app/counter"]
app_dir = %q
isolation = "class"
`, app)
}

// With isolation = "class", each node runs the objects it owns in shared
// sandboxes of its own: a node never takes another node's shared sandbox
// (listed in the common sandbox table) for its pool, which it could not
// call, and its sandboxes are named apart from the other nodes'.
func TestClusterClassIsolationSandboxesPerNode(t *testing.T) {
	e := newClusterEnvOpts(t, 2, clusterOpts{classes: ccounterClass})
	ctx := context.Background()
	n1, n2 := e.nodes[0], e.nodes[1]
	call := func(nd *clusterNode, id string) (int64, string) {
		t.Helper()
		var out struct {
			Result struct{ Value int64 }
		}
		_, served, err := e.doNode(ctx, nd, "POST", "/v1/objects/ccounter/"+id+"/call", map[string]any{"method": "increment"}, &out)
		if err != nil {
			t.Fatal(err)
		}
		return out.Result.Value, served
	}
	for i, c := range []struct {
		nd       *clusterNode
		id, want string
		value    int64
	}{{n1, "a", "n1", 1}, {n2, "b", "n2", 1}, {n2, "a", "n1", 2}, {n1, "b", "n2", 2}, {n2, "c", "n2", 1}} {
		if v, served := call(c.nd, c.id); v != c.value || served != c.want {
			t.Fatalf("call %d: %s at %s: %d served by %q; want %d by %s", i, c.id, c.nd.name, v, served, c.value, c.want)
		}
	}
	sandboxOf := func(id string) (sbID, node, key string) {
		t.Helper()
		var obj struct {
			SandboxID string `json:"sandbox_id"`
		}
		if err := e.do(ctx, n1, "GET", "/v1/objects/ccounter/"+id, nil, &obj); err != nil {
			t.Fatal(err)
		}
		var sb struct {
			SessionKey string `json:"session_key"`
		}
		_, served, err := e.doNode(ctx, n1, "GET", "/v1/sandboxes/"+obj.SandboxID, nil, &sb)
		if err != nil {
			t.Fatal(err)
		}
		return obj.SandboxID, served, sb.SessionKey
	}
	a, aNode, aKey := sandboxOf("a")
	b, bNode, bKey := sandboxOf("b")
	c, _, _ := sandboxOf("c")
	if a == b || aNode != "n1" || bNode != "n2" || b != c {
		t.Fatalf("shared sandboxes: a in %s at %s, b in %s at %s, c in %s; want a at n1, b and c in one at n2", a, aNode, b, bNode, c)
	}
	if aKey == bKey {
		t.Fatalf("both nodes' shared sandboxes are named %q", aKey)
	}
}
