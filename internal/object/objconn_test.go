package object_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/config"
	"github.com/agentkernel/agentkernel/internal/guest"
	"github.com/agentkernel/agentkernel/internal/object"
	"github.com/agentkernel/agentkernel/internal/store"
)

// records reads what the counter's "record" calls saw.
func (e *env) records(t *testing.T, k store.ObjectKey) (seqs []int64, maxInflight int64) {
	t.Helper()
	res, err := e.rt.Call(context.Background(), object.CallParams{TenantID: k.TenantID, Class: k.Class, ID: k.ID, Method: "records"})
	if err != nil {
		t.Fatal(err)
	}
	var v struct {
		Seqs        []int64 `json:"seqs"`
		MaxInflight int64   `json:"max_inflight"`
	}
	if err := json.Unmarshal(res, &v); err != nil {
		t.Fatal(err)
	}
	return v.Seqs, v.MaxInflight
}

// Calls to one object run one at a time, in the order they arrived. The
// server measures overlap itself, and sees it for a class that allows it
// (max_concurrency 4), so it would see a transport that overlapped calls.
func TestCallsRunOneAtATimeInArrivalOrder(t *testing.T) {
	_, app := builds(t)
	e := newEnv(t, func(c *object.Config) {
		c.Classes = append(c.Classes, config.ObjectClassConfig{Class: "wide", InitCommand: []string{"/app/counter"}, AppDir: app, MaxConcurrency: 4})
	})

	k := key("counter", "order")
	e.mustCall(t, k, "get", nil)
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	wg.Add(1)
	go func() {
		defer wg.Done()
		if _, err := e.call(t, k, "slow", map[string]any{"ms": 300}); err != nil {
			errs <- err
		}
	}()
	time.Sleep(50 * time.Millisecond) // the slow call holds the object
	const n = 12
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := e.call(t, k, "record", map[string]any{"seq": i, "ms": 3}); err != nil {
				errs <- err
			}
		}()
		time.Sleep(10 * time.Millisecond) // queue them in this order
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seqs, maxIn := e.records(t, k)
	want := make([]int64, n)
	for i := range want {
		want[i] = int64(i)
	}
	if !slices.Equal(seqs, want) || maxIn != 1 {
		t.Fatalf("ran %v with up to %d at once, want %v one at a time", seqs, maxIn, want)
	}

	// The control: where the class allows it, the same calls overlap.
	w := key("wide", "order")
	e.mustCall(t, w, "get", nil)
	var wg2 sync.WaitGroup
	for i := range 8 {
		wg2.Add(1)
		go func() {
			defer wg2.Done()
			_, _ = e.call(t, w, "record", map[string]any{"seq": i, "ms": 200})
		}()
	}
	wg2.Wait()
	if _, maxIn := e.records(t, w); maxIn < 2 {
		t.Fatalf("max_concurrency 4: up to %d at once; the check cannot see overlap", maxIn)
	}
}

// The daemon keeps one connection to the object's server across calls and
// makes a new one when the server restarted (it exited mid-call, or was
// killed between calls) and when the object was hibernated and woken.
func TestKeptConnectionAcrossServerRestartAndHibernation(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	k := key("wcounter", "conn")
	for i := 1; i <= 3; i++ {
		if got := e.mustCall(t, k, "increment", nil); got != int64(i) {
			t.Fatalf("increment %d: %d", i, got)
		}
	}
	if n := e.mustCall(t, k, "conns", nil); n != 1 {
		t.Fatalf("the server accepted %d connections for 4 calls, want 1", n)
	}
	pid := e.mustCall(t, k, "pid", nil)

	// The server exits mid-call: that call fails, and is not sent again.
	if _, err := e.call(t, k, "crash", nil); !errors.Is(err, object.ErrSandboxUnavailable) {
		t.Fatalf("call that crashed the server: %v", err)
	}
	if got := e.mustCall(t, k, "increment", nil); got != 4 {
		t.Fatalf("after the server restarted: %d, want 4", got)
	}
	pid2 := e.mustCall(t, k, "pid", nil)
	if pid2 == pid {
		t.Fatalf("the server was not restarted (pid %d)", pid)
	}

	// Killed between calls: the next call notices the closed connection
	// before writing to it, restarts the server and is delivered.
	o, err := e.st.GetObject(ctx, k)
	if err != nil {
		t.Fatal(err)
	}
	kill := fmt.Sprintf("kill -9 %d; while kill -0 %d 2>/dev/null; do sleep 0.01; done", pid2, pid2)
	if res, err := e.m.Exec(ctx, "t1", o.SandboxID, guest.ExecRequest{Argv: []string{"sh", "-c", kill}}, nil); err != nil || res.ExitCode != 0 {
		t.Fatalf("kill the server: %+v %v", res, err)
	}
	if got := e.mustCall(t, k, "increment", nil); got != 5 {
		t.Fatalf("after the server was killed: %d, want 5", got)
	}
	if pid3 := e.mustCall(t, k, "pid", nil); pid3 == pid2 {
		t.Fatalf("the server was not restarted (pid %d)", pid2)
	}

	if _, err := e.rt.Hibernate(ctx, k); err != nil {
		t.Fatal(err)
	}
	for i := 6; i <= 8; i++ {
		if got := e.mustCall(t, k, "increment", nil); got != int64(i) {
			t.Fatalf("after wake, increment: %d, want %d", got, i)
		}
	}
	if n := e.mustCall(t, k, "conns", nil); n != 1 {
		t.Fatalf("the woken server accepted %d connections, want 1", n)
	}
}

// A connection that breaks once the server may have run the method is the
// caller's error and the call is not sent again. In write-through mode the
// server then gets the persisted storage back (what it changed in memory
// never reached the store); in snapshot mode its memory stays the truth.
func TestBrokenConnectionMidCallIsNotResent(t *testing.T) {
	e := newEnv(t)
	for _, tc := range []struct {
		class string
		after int64 // "count" after the broken call
	}{{"wcounter", 2}, {"counter", 1002}} {
		t.Run(tc.class, func(t *testing.T) {
			k := key(tc.class, "hangup")
			e.mustCall(t, k, "increment", nil)
			e.mustCall(t, k, "increment", nil)
			// "hangup" adds 1000 in memory and closes the connection
			// without an answer.
			if _, err := e.call(t, k, "hangup", nil); !errors.Is(err, object.ErrSandboxUnavailable) {
				t.Fatalf("hung-up call: %v, want sandbox_unavailable", err)
			}
			if n := e.mustCall(t, k, "hangups", nil); n != 1 {
				t.Fatalf("the server saw the call %d times, want 1", n)
			}
			if got := e.mustCall(t, k, "get", nil); got != tc.after {
				t.Fatalf("count after the broken call: %d, want %d", got, tc.after)
			}
		})
	}
}
