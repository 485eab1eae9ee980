package sdk_test

// One server process serving many objects (a class with isolation =
// "class"): storage per object id, DELETE /__storage, the health header, and
// calls to different objects at once — run on the real Python and Node
// helpers, through their probe servers and unchanged counter examples.

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/objectserver"
	"github.com/agentkernel/agentkernel/objectserver/objectservertest"
)

// headerObjects is what a server that keeps storage per object id answers
// GET /__health with (X-Agentkernel-Objects: many).
const headerObjects = "X-Agentkernel-Objects"

func TestPythonManyObjects(t *testing.T) {
	py := interpreter(t, "/usr/bin/python3")
	pythonPath := "PYTHONPATH=" + abs(t, "python")
	t.Run("probe", func(t *testing.T) {
		cmd := exec.Command(py, abs(t, "testdata/probe.py"))
		cmd.Env = append(os.Environ(), pythonPath)
		manyObjects(t, objectservertest.StartProcess(t, cmd))
	})
	t.Run("counter", func(t *testing.T) {
		cmd := exec.Command(py, abs(t, "python/examples/counter.py"))
		cmd.Env = append(os.Environ(), pythonPath)
		manyCounters(t, objectservertest.StartProcess(t, cmd))
	})
	t.Run("older daemon", func(t *testing.T) {
		cmd := exec.Command(py, abs(t, "testdata/probe.py"))
		cmd.Env = append(os.Environ(), pythonPath)
		olderDaemon(t, objectservertest.StartProcess(t, cmd))
	})
}

func TestNodeManyObjects(t *testing.T) {
	node := interpreter(t, "/usr/bin/node")
	t.Run("probe", func(t *testing.T) {
		cmd := exec.Command(node, abs(t, "testdata/probe.js"))
		cmd.Env = append(os.Environ(), "AGENTKERNEL_OBJECT_MODULE="+abs(t, "node/agentkernel-object.js"))
		manyObjects(t, objectservertest.StartProcess(t, cmd))
	})
	t.Run("counter", func(t *testing.T) {
		cmd := exec.Command(node, abs(t, "node/examples/counter.js"))
		manyCounters(t, objectservertest.StartProcess(t, cmd))
	})
	t.Run("older daemon", func(t *testing.T) {
		cmd := exec.Command(node, abs(t, "testdata/probe.js"))
		cmd.Env = append(os.Environ(), "AGENTKERNEL_OBJECT_MODULE="+abs(t, "node/agentkernel-object.js"))
		olderDaemon(t, objectservertest.StartProcess(t, cmd))
	})
}

// obj is one object of the class "probe" on a server at base; id "" sends
// no object headers at all, as a daemon from before isolation "class" does.
type obj struct {
	t        *testing.T
	base, id string
}

func (o obj) headers(mode string) http.Header {
	h := http.Header{}
	if o.id != "" {
		h.Set(objectserver.HeaderObjectClass, "probe")
		h.Set(objectserver.HeaderObjectID, o.id)
	}
	if mode != "" {
		h.Set(objectserver.HeaderStorageMode, mode)
	}
	return h
}

// do sends one request; it reports errors rather than failing, so that it
// may run off the test's goroutine.
func do(base, method, path string, h http.Header, body string) (int, http.Header, []byte, error) {
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	for k, vs := range h {
		req.Header[k] = vs
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

func (o obj) must(method, path string, h http.Header, body string, wantStatus int) []byte {
	o.t.Helper()
	status, _, b, err := do(o.base, method, path, h, body)
	if err != nil {
		o.t.Fatalf("object %q: %s %s: %v", o.id, method, path, err)
	}
	if status != wantStatus {
		o.t.Fatalf("object %q: %s %s: status %d, want %d (body %s)", o.id, method, path, status, wantStatus, b)
	}
	return b
}

func (o obj) restore(storage string) {
	o.t.Helper()
	o.must(http.MethodPost, objectserver.StoragePath, o.headers(""), storage, http.StatusOK)
}

func (o obj) dump(want string) {
	o.t.Helper()
	sameJSON(o.t, fmt.Sprintf("object %q: dump", o.id), o.must(http.MethodGet, objectserver.StoragePath, o.headers(""), "", http.StatusOK), want)
}

func (o obj) forget() {
	o.t.Helper()
	if b := o.must(http.MethodDelete, objectserver.StoragePath, o.headers(""), "", http.StatusNoContent); len(b) != 0 {
		o.t.Errorf("object %q: DELETE %s: body %q, want none", o.id, objectserver.StoragePath, b)
	}
}

func (o obj) call(mode, method, args, want string) {
	o.t.Helper()
	sameJSON(o.t, fmt.Sprintf("object %q: %s %s %s", o.id, mode, method, args),
		o.must(http.MethodPost, "/"+method, o.headers(mode), args, http.StatusOK), want)
}

func sameJSON(t *testing.T, what string, got []byte, want string) {
	t.Helper()
	var g, w any
	if err := json.Unmarshal(got, &g); err != nil {
		t.Errorf("%s: %q is not JSON: %v", what, got, err)
		return
	}
	if err := json.Unmarshal([]byte(want), &w); err != nil {
		t.Fatalf("%s: bad expectation %q: %v", what, want, err)
	}
	if !reflect.DeepEqual(g, w) {
		t.Errorf("%s: %s, want %s", what, got, want)
	}
}

// manyObjects checks a probe server (see objectservertest.Probe) keeps
// storage per object id.
func manyObjects(t *testing.T, base string) {
	snap, wt := objectserver.ModeSnapshot, objectserver.ModeWriteThrough

	t.Run("health says many", func(t *testing.T) { healthSaysMany(t, base) })
	t.Run("storage per object", func(t *testing.T) {
		a, b, legacy := obj{t, base, "a"}, obj{t, base, "b"}, obj{t, base, ""}
		a.restore(`{"n": 1, "only-a": true}`)
		b.restore(`{"n": 2}`)
		legacy.restore(`{"old": "daemon"}`)
		a.dump(`{"n": 1, "only-a": true}`)
		b.dump(`{"n": 2}`)
		legacy.dump(`{"old": "daemon"}`)
		obj{t, base, "never-seen"}.dump(`{}`)

		a.call(snap, "apply", `{"ops": [{"put": "k", "value": "a"}]}`, `{"keys": ["k", "n", "only-a"]}`)
		b.call(wt, "apply", `{"ops": [{"put": "k", "value": "b"}, {"delete": "n"}]}`,
			`{"result": {"keys": ["k"]}, "writes": [{"key": "k", "value": "b"}, {"key": "n", "delete": true}]}`)
		a.call(wt, "apply", `{"ops": []}`, `{"result": {"keys": ["k", "n", "only-a"]}, "writes": []}`)
		a.call(snap, "echo", `1`, `{"method": "echo", "class": "probe", "id": "a", "mode": "snapshot", "args": 1, "alarm": null}`)
		a.dump(`{"n": 1, "only-a": true, "k": "a"}`)
		b.dump(`{"k": "b"}`)
		legacy.dump(`{"old": "daemon"}`)

		// Restoring one object leaves the others as they are.
		b.restore(`{}`)
		a.dump(`{"n": 1, "only-a": true, "k": "a"}`)
		b.dump(`{}`)
	})
	t.Run("forget one object", func(t *testing.T) {
		a, b, legacy := obj{t, base, "fa"}, obj{t, base, "fb"}, obj{t, base, ""}
		a.restore(`{"x": 1}`)
		b.restore(`{"y": 2}`)
		legacy.restore(`{"z": 3}`)
		a.forget()
		a.dump(`{}`)
		b.dump(`{"y": 2}`)
		legacy.dump(`{"z": 3}`)
		// It comes back empty: a woken object gets its storage restored.
		a.call(wt, "apply", `{"ops": []}`, `{"result": {"keys": []}, "writes": []}`)
		obj{t, base, "never-seen"}.forget()
		legacy.forget()
		legacy.dump(`{}`)
		b.dump(`{"y": 2}`)
		b.forget()
	})
	t.Run("without object headers", func(t *testing.T) {
		// An older daemon sends no object headers: one object, "", as before.
		legacy, a := obj{t, base, ""}, obj{t, base, "with-id"}
		legacy.restore(`{"count": 1}`)
		a.restore(`{"count": 100}`)
		legacy.call("", "apply", `{"ops": [{"put": "more", "value": 2}]}`, `{"keys": ["count", "more"]}`)
		legacy.call(wt, "apply", `{"ops": [{"delete": "more"}]}`,
			`{"result": {"keys": ["count"]}, "writes": [{"key": "more", "delete": true}]}`)
		legacy.call("", "echo", ``, `{"method": "echo", "class": "", "id": "", "mode": "snapshot", "args": null, "alarm": null}`)
		legacy.dump(`{"count": 1}`)
		a.dump(`{"count": 100}`)
	})
	t.Run("concurrent calls to different objects", func(t *testing.T) {
		concurrentObjects(t, base)
	})
}

// concurrentObjects sends write-through apply calls to several objects from
// several goroutines at once (two per object: a class may also allow
// concurrency within one object). Each call must see only its own object's
// keys and report exactly its own writes; each object must end up with
// exactly the keys written to it.
func concurrentObjects(t *testing.T, base string) {
	const objects, workersPerObject, calls = 4, 2, 15
	for i := range objects {
		obj{t, base, fmt.Sprintf("c%d", i)}.restore(`{}`)
	}
	var wg sync.WaitGroup
	errs := make(chan error, objects*workersPerObject)
	for i := range objects {
		for w := range workersPerObject {
			wg.Add(1)
			go func() {
				defer wg.Done()
				id := fmt.Sprintf("c%d", i)
				for n := range calls {
					if err := applyTo(base, id, fmt.Sprintf("%s-w%d-%d", id, w, n)); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	for i := range objects {
		o := obj{t, base, fmt.Sprintf("c%d", i)}
		var dump map[string]json.RawMessage
		if err := json.Unmarshal(o.must(http.MethodGet, objectserver.StoragePath, o.headers(""), "", http.StatusOK), &dump); err != nil {
			t.Fatalf("object %s: dump: %v", o.id, err)
		}
		for k := range dump {
			if !strings.HasPrefix(k, o.id+"-") {
				t.Errorf("object %s holds %q, written to another object", o.id, k)
			}
		}
		if want := workersPerObject * calls * 2; len(dump) != want {
			t.Errorf("object %s: %d keys after its calls, want %d", o.id, len(dump), want)
		}
		o.forget()
	}
}

// applyTo puts p-a and p-b on object id, write-through.
func applyTo(base, id, p string) error {
	h := obj{nil, base, id}.headers(objectserver.ModeWriteThrough)
	status, _, b, err := do(base, http.MethodPost, "/apply", h,
		fmt.Sprintf(`{"ops": [{"put": %q, "value": 1}, {"put": %q, "value": 2}]}`, p+"-a", p+"-b"))
	if err != nil {
		return fmt.Errorf("apply %s: %v", p, err)
	}
	var env struct {
		Result struct{ Keys []string }
		Writes []struct{ Key string }
	}
	if status != http.StatusOK || json.Unmarshal(b, &env) != nil {
		return fmt.Errorf("apply %s: status %d body %s", p, status, b)
	}
	if len(env.Writes) != 2 || env.Writes[0].Key != p+"-a" || env.Writes[1].Key != p+"-b" {
		return fmt.Errorf("apply %s on object %s: writes %s, want exactly its own two, in order", p, id, b)
	}
	for _, k := range env.Result.Keys {
		if !strings.HasPrefix(k, id+"-") {
			return fmt.Errorf("apply %s on object %s saw key %q of another object", p, id, k)
		}
	}
	return nil
}

// manyCounters runs the unchanged counter example for two objects on one
// server: same code, separate counts.
func manyCounters(t *testing.T, base string) {
	a, b := obj{t, base, "user-1"}, obj{t, base, "user-2"}
	a.restore(`{}`)
	b.restore(`{"count": 40}`)
	a.call(objectserver.ModeSnapshot, "increment", `{"amount": 5}`, `{"value": 5}`)
	b.call(objectserver.ModeWriteThrough, "increment", `{"amount": 2}`,
		`{"result": {"value": 42}, "writes": [{"key": "count", "value": 42}]}`)
	a.call(objectserver.ModeSnapshot, "get", ``, `{"value": 5}`)
	b.call(objectserver.ModeWriteThrough, "reset", ``,
		`{"result": {"value": 0}, "writes": [{"key": "count", "delete": true}]}`)
	a.dump(`{"count": 5}`)
	b.dump(`{}`)
	a.forget()
	a.call(objectserver.ModeSnapshot, "get", ``, `{"value": 0}`)
	healthSaysMany(t, base)
}

// healthSaysMany checks GET /__health answers X-Agentkernel-Objects: many,
// without which the daemon refuses the server for isolation = "class".
func healthSaysMany(t *testing.T, base string) {
	t.Helper()
	status, h, b, err := do(base, http.MethodGet, objectserver.HealthPath, nil, "")
	if err != nil || status != http.StatusOK {
		t.Fatalf("GET /__health: %d %s %v", status, b, err)
	}
	if got := h.Get(headerObjects); got != "many" {
		t.Errorf("GET /__health: %s %q, want \"many\"", headerObjects, got)
	}
}

// olderDaemon checks, on a fresh server, what a daemon from before isolation
// = "class" does: it names the object on method calls only, never on
// /__storage, and sends a server one object. Until a /__storage request
// names an object, the first object called shares the storage of the object
// "" that header-less /__storage requests address; from then on every
// object, "" included, is on its own.
func olderDaemon(t *testing.T, base string) {
	wt := objectserver.ModeWriteThrough
	storage, x := obj{t, base, ""}, obj{t, base, "x"}
	storage.restore(`{"count": 3}`) // the wake's restore
	x.call(wt, "apply", `{"ops": [{"put": "more", "value": 1}]}`,
		`{"result": {"keys": ["count", "more"]}, "writes": [{"key": "more", "value": 1}]}`)
	storage.dump(`{"count": 3, "more": 1}`) // the hibernation's dump
	// Another object on the same server is still on its own.
	y := obj{t, base, "y"}
	y.call(wt, "apply", `{"ops": []}`, `{"result": {"keys": []}, "writes": []}`)

	// A daemon that names objects on /__storage: "" is no longer x.
	obj{t, base, "z"}.restore(`{"z": 1}`)
	x.dump(`{"count": 3, "more": 1}`)
	storage.dump(`{}`)
	storage.restore(`{"alone": true}`)
	x.call(wt, "apply", `{"ops": []}`, `{"result": {"keys": ["count", "more"]}, "writes": []}`)
	y.dump(`{}`)
}

// BenchmarkManyObjectsPSS measures what one more object costs a helper's
// server process that serves many (isolation = "class"): each iteration
// restores a new object's storage ({"count": n}) and calls it once
// (increment, write-through); the process's PSS before and after gives
// PSS-KiB/object. Run with a fixed count, e.g. -benchtime=1000x.
func BenchmarkManyObjectsPSS(b *testing.B) {
	for _, lang := range []struct{ name, interp, example string }{
		{"python", "/usr/bin/python3", "python/examples/counter.py"},
		{"node", "/usr/bin/node", "node/examples/counter.js"},
	} {
		b.Run(lang.name, func(b *testing.B) {
			if _, err := os.Stat(lang.interp); err != nil {
				b.Skip(lang.interp + " is not installed")
			}
			cmd := exec.Command(lang.interp, abs(b, lang.example))
			cmd.Env = append(os.Environ(), "PYTHONPATH="+abs(b, "python"))
			base := startForBench(b, cmd)
			before := pss(b, cmd.Process.Pid)
			b.ResetTimer()
			for i := range b.N {
				id := fmt.Sprintf("user-%d", i)
				h := obj{nil, base, id}.headers(objectserver.ModeWriteThrough)
				if st, _, body, err := do(base, http.MethodPost, objectserver.StoragePath, h, fmt.Sprintf(`{"count": %d}`, i)); err != nil || st != http.StatusOK {
					b.Fatalf("restore %s: %d %s %v", id, st, body, err)
				}
				if st, _, body, err := do(base, http.MethodPost, "/increment", h, `{}`); err != nil || st != http.StatusOK {
					b.Fatalf("increment %s: %d %s %v", id, st, body, err)
				}
			}
			b.StopTimer()
			after := pss(b, cmd.Process.Pid)
			b.ReportMetric(float64(after-before)/float64(b.N), "PSS-KiB/object")
			b.ReportMetric(float64(after), "PSS-KiB")
		})
	}
}

// startForBench is objectservertest.StartProcess for a benchmark.
func startForBench(b *testing.B, cmd *exec.Cmd) string {
	b.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	cmd.Env = append(cmd.Environ(), objectserver.PortEnv+"="+strconv.Itoa(port))
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if st, _, _, err := do(base, http.MethodGet, objectserver.HealthPath, nil, ""); err == nil && st == http.StatusOK {
			return base
		}
		if time.Now().After(deadline) {
			b.Fatalf("%v: no answer on %s after 30s", cmd.Args, base)
		}
	}
}

// pss is the process's proportional set size in KiB.
func pss(b *testing.B, pid int) int64 {
	b.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		b.Skipf("no smaps_rollup: %v", err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "Pss:" {
			n, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				b.Fatal(err)
			}
			return n
		}
	}
	b.Fatalf("no Pss in /proc/%d/smaps_rollup", pid)
	return 0
}
