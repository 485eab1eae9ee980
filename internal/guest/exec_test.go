package guest

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestExecExitCodes(t *testing.T) {
	c, _ := startGuest(t, nil)
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		req  ExecRequest
		code int
	}{
		{"true", ExecRequest{Argv: []string{"true"}}, 0},
		{"false", ExecRequest{Argv: []string{"false"}}, 1},
		{"shell exit", ExecRequest{Shell: "exit 42"}, 42},
		{"missing binary", ExecRequest{Argv: []string{"no-such-binary-xyz"}}, 127},
		{"missing absolute", ExecRequest{Argv: []string{"/no/such/binary"}}, 127},
		{"killed by signal", ExecRequest{Shell: "kill -9 $$"}, 137},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, res, err := c.ExecOutput(ctx, tc.req)
			if err != nil {
				t.Fatal(err)
			}
			if res.ExitCode != tc.code {
				t.Fatalf("exit code = %d, want %d", res.ExitCode, tc.code)
			}
		})
	}
}

func TestExecOutputEnvCwd(t *testing.T) {
	c, work := startGuest(t, nil)
	if err := os.Mkdir(work+"/sub", 0o755); err != nil {
		t.Fatal(err)
	}
	out, errb, res, err := c.ExecOutput(context.Background(), ExecRequest{
		Shell: `echo "$GREETING"; pwd; echo oops >&2`,
		Env:   map[string]string{"GREETING": "hello world"},
		Cwd:   "sub",
	})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(out), "hello world\n"+work+"/sub\n"; got != want || res.ExitCode != 0 {
		t.Fatalf("stdout = %q (exit %d), want %q", got, res.ExitCode, want)
	}
	if string(errb) != "oops\n" {
		t.Fatalf("stderr = %q", errb)
	}
	// An argv that is not found still reports why on stderr.
	_, errb, _, err = c.ExecOutput(context.Background(), ExecRequest{Argv: []string{"no-such-binary-xyz"}})
	if err != nil || !strings.Contains(string(errb), "not found") {
		t.Fatalf("stderr = %q, err = %v", errb, err)
	}
}

func TestExecBadRequests(t *testing.T) {
	c, _ := startGuest(t, nil)
	for _, req := range []ExecRequest{
		{},
		{Argv: []string{"true"}, Shell: "true"},
		{Argv: []string{"true"}, Cwd: "/no/such/dir"},
	} {
		_, err := c.Exec(context.Background(), req, nil)
		var ge *Error
		if !errors.As(err, &ge) || ge.Status != 400 {
			t.Errorf("Exec(%+v) err = %v, want HTTP 400", req, err)
		}
	}
}

// Output is streamed: the first chunk arrives while the command still runs.
func TestExecStreamsInOrder(t *testing.T) {
	c, work := startGuest(t, nil)
	gate := work + "/gate"
	var chunks []string
	first := make(chan struct{})
	res, err := c.Exec(context.Background(), ExecRequest{
		// The command waits for the gate file that the test creates only
		// after it received "one": so "one" must have been streamed.
		Shell: `echo one; while [ ! -e gate ]; do sleep 0.01; done; echo two; echo three`,
	}, func(stream string, data []byte) {
		chunks = append(chunks, string(data))
		if len(chunks) == 1 {
			close(first)
			if err := os.WriteFile(gate, nil, 0o644); err != nil {
				t.Error(err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	<-first
	if got := strings.Join(chunks, ""); got != "one\ntwo\nthree\n" || chunks[0] != "one\n" || res.ExitCode != 0 {
		t.Fatalf("chunks = %q exit %d", chunks, res.ExitCode)
	}
}

// A timeout kills the whole process group, grandchildren included.
func TestExecTimeoutKillsGrandchild(t *testing.T) {
	c, _ := startGuest(t, nil)
	out, _, res, err := c.ExecOutput(context.Background(), ExecRequest{
		Shell:     `sleep 100 & echo $!; sleep 100`,
		TimeoutMS: 300,
	})
	if err != nil {
		t.Fatal(err)
	}
	if !res.TimedOut || res.ExitCode != 128+int(syscall.SIGKILL) {
		t.Fatalf("result = %+v, want timed out with 137", res)
	}
	assertGone(t, string(out))
}

// Closing the request (client cancel) kills the process group.
func TestExecCancelKillsGroup(t *testing.T) {
	c, _ := startGuest(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	pids := make(chan string, 1)
	_, err := c.Exec(ctx, ExecRequest{Shell: `sleep 100 & echo $!; sleep 100`}, func(_ string, data []byte) {
		pids <- string(data)
		cancel()
	})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	assertGone(t, <-pids)
}

// assertGone waits until the process with the pid in s no longer exists
// (or is a zombie waiting for the host's init).
func assertGone(t *testing.T, s string) {
	t.Helper()
	pid, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		t.Fatalf("no pid in output %q", s)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		if f := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:])); len(f) > 0 && f[0] == "Z" {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("grandchild %d still alive: %s", pid, stat)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// When the command exits, leftovers in its group are killed and the exec
// returns instead of waiting for them.
func TestExecKillsLeftoversOnExit(t *testing.T) {
	c, _ := startGuest(t, nil)
	out, _, res, err := c.ExecOutput(context.Background(), ExecRequest{Shell: `sleep 100 & echo $!`})
	if err != nil || res.ExitCode != 0 {
		t.Fatalf("res %+v err %v", res, err)
	}
	assertGone(t, string(out))
}
