package object_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel"
	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/testenv"
)

var (
	serveOnce sync.Once
	serveBin  string
	serveErr  error
)

// agentkernelBinary builds cmd/agentkernel statically once (it is also
// the guest injected into sandboxes), with the crash-test failpoints.
func agentkernelBinary(t *testing.T) string {
	t.Helper()
	serveOnce.Do(func() {
		dir, err := testenv.ProcessTempDir("akbin")
		if err != nil {
			serveErr = err
			return
		}
		serveBin = filepath.Join(dir, "agentkernel")
		cmd := exec.Command("go", "build", "-tags", "failpoints", "-o", serveBin, "github.com/agentkernel/agentkernel/cmd/agentkernel")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			serveErr = fmt.Errorf("build agentkernel: %v\n%s", err, b)
		}
	})
	if serveErr != nil {
		t.Fatal(serveErr)
	}
	return serveBin
}

// served is a real `agentkernel serve` process.
type served struct {
	cmd    *exec.Cmd
	url    string
	client *agentkernel.Client
	stderr *bytes.Buffer
}

type serveEnv struct {
	bin, home, config string
	cur               *served
}

func newServeEnv(t *testing.T) *serveEnv {
	t.Helper()
	_, app := builds(t)
	bin := agentkernelBinary(t)
	home := t.TempDir()
	run, err := os.MkdirTemp("", "aksv")
	if err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(home, "agentkernel.toml")
	toml := fmt.Sprintf(`
[sandbox]
run_dir = %q
guest_binary = %q

[durable_objects]
alarm_poll_interval = "100ms"
app_roots = [%q]

[[objects]]
class = "counter"
init_command = ["/app/counter"]
app_dir = %q

[[objects]]
class = "wcounter"
init_command = ["/app/counter"]
app_dir = %q
storage_mode = "write-through"

[[objects]]
class = "cwcounter"
init_command = ["/app/counter"]
app_dir = %q
storage_mode = "write-through"
isolation = "class"
`, run, bin, app, app, app, app)
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &serveEnv{bin: bin, home: home, config: cfg}
	// Sandboxes outlive a SIGKILLed daemon by design: a daemon running (or
	// started again) on the home deletes the objects and destroys every
	// sandbox left.
	t.Cleanup(func() {
		defer os.RemoveAll(run)
		if e.cur == nil {
			e.start(t)
		}
		ctx := context.Background()
		objs, _ := e.cur.client.Objects.List(ctx, agentkernel.ObjectListParams{})
		for _, o := range objs {
			_ = e.cur.client.Objects.Delete(ctx, o.Class, o.ID)
		}
		key, err := os.ReadFile(filepath.Join(e.home, "admin.key"))
		if err != nil {
			t.Error(err)
		} else {
			testenv.DestroySandboxes(t, e.cur.url, strings.TrimSpace(string(key)))
		}
		_ = e.cur.cmd.Process.Signal(syscall.SIGTERM)
		_ = e.cur.cmd.Wait()
	})
	return e
}

func (e *serveEnv) start(t *testing.T) *served {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(e.bin, "serve", "--config", e.config, "--home", e.home, "--listen", addr)
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "AGENTKERNEL_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	url := "http://" + addr
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url + "/healthz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				break
			}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			cmd.Wait()
			t.Fatalf("serve did not become healthy:\n%s", stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	key, err := os.ReadFile(filepath.Join(e.home, "admin.key"))
	if err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, url: url, stderr: &stderr,
		client: agentkernel.New(agentkernel.WithBaseURL(url), agentkernel.WithAPIKey(strings.TrimSpace(string(key))))}
	e.cur = s
	return s
}

func (e *serveEnv) kill(t *testing.T) {
	t.Helper()
	if err := e.cur.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = e.cur.cmd.Wait()
	e.cur = nil
}

func sdkValue(r agentkernel.ObjectResult) int64 {
	var v struct{ Value int64 }
	_ = r.Decode(&v)
	return v.Value
}

// SIGKILL of the daemon in write-through mode loses no acknowledged
// increment: every value a caller was answered is in the store after a
// restart, and the object continues from it.
func TestSIGKILLLosesNoAcknowledgedWriteThroughIncrement(t *testing.T) {
	e := newServeEnv(t)
	s := e.start(t)
	ctx := context.Background()
	const objects = 4
	acked := make([]int64, objects)
	for i := range objects {
		if _, err := s.client.Objects.Call(ctx, "wcounter", fmt.Sprint("k", i), agentkernel.ObjectCall{Method: "get"}); err != nil {
			t.Fatal(err)
		}
	}
	// The kill lands while every object has increments in flight: each
	// caller reports its third acknowledgement and keeps calling.
	var wg sync.WaitGroup
	warm := make(chan struct{}, objects)
	for i := range objects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; ; n++ {
				r, err := s.client.Objects.Call(ctx, "wcounter", fmt.Sprint("k", i), agentkernel.ObjectCall{Method: "increment"})
				if err != nil {
					return // the daemon died
				}
				acked[i] = sdkValue(r)
				if n == 3 {
					warm <- struct{}{}
				}
			}
		}()
	}
	for range objects {
		<-warm
	}
	e.kill(t)
	wg.Wait()
	s = e.start(t)
	for i := range objects {
		id := fmt.Sprint("k", i)
		info, err := s.client.Objects.Get(ctx, "wcounter", id)
		if err != nil {
			t.Fatal(err)
		}
		var stored int64
		fmt.Sscan(string(info.Storage["count"]), &stored)
		if acked[i] == 0 || stored < acked[i] || stored > acked[i]+1 {
			t.Fatalf("%s: acknowledged %d, stored %d after SIGKILL", id, acked[i], stored)
		}
		r, err := s.client.Objects.Call(ctx, "wcounter", id, agentkernel.ObjectCall{Method: "increment"})
		if err != nil || sdkValue(r) != stored+1 {
			t.Fatalf("%s: increment after restart: %s %v (stored %d)", id, r, err, stored)
		}
		t.Logf("%s: %d acknowledged before SIGKILL, %d stored", id, acked[i], stored)
	}
}

// TestAlarmFiresAtLeastOnceAcrossSIGKILL: the daemon is SIGKILLed after
// the object answered an alarm's call and before the alarm was marked
// fired. After the restart the alarm is delivered a second time and ends
// fired: at least once. The object counts deliveries in write-through
// storage (each increment is stored before the object's answer is
// accepted), so an at-most-once delivery leaves the count at 1 and fails.
func TestAlarmFiresAtLeastOnceAcrossSIGKILL(t *testing.T) {
	e := newServeEnv(t)
	s := e.start(t)
	ctx := context.Background()
	if _, err := s.client.Objects.Call(ctx, "wcounter", "al", agentkernel.ObjectCall{Method: "get"}); err != nil {
		t.Fatal(err)
	}
	flag := filepath.Join(e.home, "failpoint-"+object.FailAfterAlarmDelivery)
	if err := os.WriteFile(flag, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	al, err := s.client.Objects.SetAlarm(ctx, "wcounter", "al", agentkernel.AlarmParams{Method: "increment", FireAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if _, err := os.Stat(flag + ".reached"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the alarm was never delivered up to its fired mark\n%s", s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.kill(t) // delivered once, not marked fired
	os.Remove(flag)
	os.Remove(flag + ".reached")

	s = e.start(t)
	deadline = time.Now().Add(60 * time.Second)
	for {
		alarms, err := s.client.Objects.ListAlarms(ctx, "wcounter", "al")
		if err != nil {
			t.Fatal(err)
		}
		if len(alarms) == 1 && alarms[0].ID == al.ID && alarms[0].Fired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alarm not fired after restart: %+v\n%s", alarms, s.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	info, err := s.client.Objects.Get(ctx, "wcounter", "al")
	if err != nil {
		t.Fatal(err)
	}
	if got := string(info.Storage["count"]); got != "2" {
		t.Fatalf("the object counted %s deliveries; want 2: the one the SIGKILL cut off before the fired mark, and the redelivery after restart", got)
	}
}

// Class mode (issue 15): two objects share one sandbox and one server;
// the daemon is SIGKILLed while both have increments in flight. After the
// restart every acknowledged increment is in the store, each object's
// storage is its own (the server got each one's persisted storage back,
// by id, before its next call), and both still share the sandbox.
func TestSIGKILLClassIsolationLosesNoAcknowledgedWrite(t *testing.T) {
	e := newServeEnv(t)
	s := e.start(t)
	ctx := context.Background()
	ids := []string{"p", "q"}
	// Different steps, so a mixed-up storage shows.
	step := map[string]int64{"p": 1, "q": 1000}
	acked := map[string]int64{}
	var mu sync.Mutex
	for _, id := range ids {
		if _, err := s.client.Objects.Call(ctx, "cwcounter", id, agentkernel.ObjectCall{Method: "put", Args: map[string]any{"key": "owner", "value": id}}); err != nil {
			t.Fatal(err)
		}
	}
	sandboxOf := func(s *served, id string) string {
		o, err := s.client.Objects.Get(ctx, "cwcounter", id)
		if err != nil {
			t.Fatal(err)
		}
		return o.SandboxID
	}
	shared := sandboxOf(s, "p")
	if sandboxOf(s, "q") != shared {
		t.Fatal("p and q do not share a sandbox")
	}
	var wg sync.WaitGroup
	warm := make(chan struct{}, len(ids))
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 1; ; n++ {
				r, err := s.client.Objects.Call(ctx, "cwcounter", id, agentkernel.ObjectCall{Method: "increment", Args: map[string]any{"amount": step[id]}})
				if err != nil {
					return // the daemon died
				}
				mu.Lock()
				acked[id] = sdkValue(r)
				mu.Unlock()
				if n == 3 {
					warm <- struct{}{}
				}
			}
		}()
	}
	for range ids {
		<-warm
	}
	e.kill(t)
	wg.Wait()
	s = e.start(t)
	for _, id := range ids {
		info, err := s.client.Objects.Get(ctx, "cwcounter", id)
		if err != nil {
			t.Fatal(err)
		}
		var stored int64
		fmt.Sscan(string(info.Storage["count"]), &stored)
		if acked[id] == 0 || stored < acked[id] || stored > acked[id]+step[id] || stored%step[id] != 0 {
			t.Fatalf("%s: acknowledged %d, stored %d after SIGKILL", id, acked[id], stored)
		}
		if got := string(info.Storage["owner"]); got != `"`+id+`"` || len(info.Storage) != 2 {
			t.Fatalf("%s: storage after restart %v: not its own", id, info.Storage)
		}
		r, err := s.client.Objects.Call(ctx, "cwcounter", id, agentkernel.ObjectCall{Method: "increment", Args: map[string]any{"amount": step[id]}})
		if err != nil || sdkValue(r) != stored+step[id] {
			t.Fatalf("%s: increment after restart: %s %v (stored %d)", id, r, err, stored)
		}
		if sandboxOf(s, id) != shared {
			t.Fatalf("%s moved out of the shared sandbox after the restart", id)
		}
		t.Logf("%s: %d acknowledged before SIGKILL, %d stored", id, acked[id], stored)
	}
	r, err := s.client.Objects.Call(ctx, "cwcounter", "p", agentkernel.ObjectCall{Method: "objects"})
	if err != nil || sdkValue(r) != 2 {
		t.Fatalf("the shared server holds %s objects after the restart (%v), want 2", r, err)
	}
}
