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
)

var (
	serveOnce sync.Once
	serveBin  string
	serveErr  error
)

// agentkernelBinary builds cmd/agentkernel statically once (it is also
// the guest injected into sandboxes).
func agentkernelBinary(t *testing.T) string {
	t.Helper()
	serveOnce.Do(func() {
		dir, err := os.MkdirTemp("", "akbin")
		if err != nil {
			serveErr = err
			return
		}
		serveBin = filepath.Join(dir, "agentkernel")
		cmd := exec.Command("go", "build", "-o", serveBin, "github.com/agentkernel/agentkernel/cmd/agentkernel")
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
`, run, bin, app, app, app)
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	e := &serveEnv{bin: bin, home: home, config: cfg}
	t.Cleanup(func() {
		if e.cur == nil {
			e.start(t)
		}
		ctx := context.Background()
		objs, _ := e.cur.client.Objects.List(ctx, agentkernel.ObjectListParams{})
		for _, o := range objs {
			_ = e.cur.client.Objects.Delete(ctx, o.Class, o.ID)
		}
		_ = e.cur.cmd.Process.Signal(syscall.SIGTERM)
		_ = e.cur.cmd.Wait()
		os.RemoveAll(run)
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
	var wg sync.WaitGroup
	for i := range objects {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				r, err := s.client.Objects.Call(ctx, "wcounter", fmt.Sprint("k", i), agentkernel.ObjectCall{Method: "increment"})
				if err != nil {
					return // the daemon died
				}
				acked[i] = sdkValue(r)
			}
		}()
	}
	time.Sleep(700 * time.Millisecond)
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

// An alarm being delivered when the daemon is SIGKILLed is not marked
// fired, so it fires again after the restart: at least once.
func TestAlarmFiresAtLeastOnceAcrossSIGKILL(t *testing.T) {
	e := newServeEnv(t)
	s := e.start(t)
	ctx := context.Background()
	if _, err := s.client.Objects.Call(ctx, "counter", "al", agentkernel.ObjectCall{Method: "get"}); err != nil {
		t.Fatal(err)
	}
	al, err := s.client.Objects.SetAlarm(ctx, "counter", "al", agentkernel.AlarmParams{Method: "slow", Args: map[string]any{"ms": 1500}, FireAt: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(700 * time.Millisecond) // the poller (every 100ms) is inside the 1.5 s call
	e.kill(t)
	s = e.start(t)
	deadline := time.Now().Add(30 * time.Second)
	for {
		alarms, err := s.client.Objects.ListAlarms(ctx, "counter", "al")
		if err != nil {
			t.Fatal(err)
		}
		if len(alarms) == 1 && alarms[0].ID == al.ID && alarms[0].Fired {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("alarm not fired after restart: %+v\n%s", alarms, s.stderr.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	r, err := s.client.Objects.Call(ctx, "counter", "al", agentkernel.ObjectCall{Method: "get"})
	if err != nil || sdkValue(r) < 1 {
		t.Fatalf("count after the alarm: %s %v", r, err)
	}
	t.Logf("the alarm ran %d time(s) across the SIGKILL", sdkValue(r))
}
