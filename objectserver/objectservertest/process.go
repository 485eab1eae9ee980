package objectservertest

import (
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/objectserver"
)

// StartProcess starts cmd as an object server on a free port (passed in
// $AGENTKERNEL_OBJECT_PORT), waits until GET /__health answers, and returns
// its base URL. The process is killed when the test ends.
func StartProcess(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	port := freePort(t)
	cmd.Env = append(cmd.Environ(), objectserver.PortEnv+"="+strconv.Itoa(port))
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %v: %v", cmd.Args, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			t.Logf("output of %v:\n%s", cmd.Args, out.String())
		}
	})
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	// Poll for readiness: the interpreter's start-up time is not ours to
	// know. The deadline only stops a server that never comes up.
	deadline := time.Now().Add(30 * time.Second)
	for {
		select {
		case err := <-exited:
			exited <- err
			t.Fatalf("%v exited before serving: %v", cmd.Args, err)
		default:
		}
		resp, err := http.Get(base + objectserver.HealthPath)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return base
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%v: no answer on %s after 30s: %v", cmd.Args, base, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
