package sandboxtest

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentkernel/agentkernel/internal/sandbox"
)

// testIsolation: the sandbox sees no daemon data dir and no other
// sandbox's workspace, and can write only to /workspace and /tmp.
func (s *suite) testIsolation(t *testing.T) {
	d := s.h.NewDriver(t)
	// A dir that stands for $AGENTKERNEL_HOME, and a second sandbox's
	// workspace, both on the host.
	home := t.TempDir()
	if err := os.WriteFile(filepath.Join(home, "state.db"), []byte("TOP-SECRET-STATE"), 0o644); err != nil {
		t.Fatal(err)
	}
	other := newDirs(t)
	if err := os.WriteFile(filepath.Join(other.workspace, "theirs.txt"), []byte("OTHER-SANDBOX-DATA"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, c := start(t, d, s.spec(t, newDirs(t)))

	for _, p := range []string{filepath.Join(home, "state.db"), filepath.Join(other.workspace, "theirs.txt"), "/root", "/etc/shadow", "/home", "/work"} {
		out, _, code := run(t, c, fmt.Sprintf("cat %q 2>&1; ls %q 2>&1", p, p))
		if code == 0 || strings.Contains(out, "SECRET") || strings.Contains(out, "OTHER-SANDBOX") {
			t.Errorf("sandbox can read host path %s (exit %d):\n%s", p, code, out)
		}
	}
	for _, p := range []string{"/etc/ak-test", "/usr/ak-test", "/ak-test", "/bin/ak-test", sandbox.GuestBinaryPath} {
		if _, _, code := run(t, c, fmt.Sprintf("echo x > %q", p)); code == 0 {
			t.Errorf("sandbox can write %s", p)
		}
	}
	for _, p := range []string{"/workspace/ok", "/tmp/ok"} {
		if _, errb, code := run(t, c, fmt.Sprintf("echo x > %q", p)); code != 0 {
			t.Errorf("sandbox cannot write %s: %s", p, errb)
		}
	}
	// Own PID namespace: the guest is PID 1 and the host's processes are
	// invisible.
	out, _, _ := run(t, c, "cat /proc/1/cmdline | tr '\\0' ' '; echo; ls /proc | grep -c '^[0-9]'")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 || !strings.Contains(lines[0], "guest") {
		t.Errorf("PID 1 is not the guest: %q", out)
	}
	var n int
	if len(lines) == 2 {
		fmt.Sscan(lines[1], &n)
	}
	if n == 0 || n > 10 {
		t.Errorf("sandbox sees %d processes, want only its own few", n)
	}
}

// testNetwork: with the default network (none) only loopback exists and a
// listener on the host's 127.0.0.1 is unreachable.
func (s *suite) testNetwork(t *testing.T) {
	if s.h.Network == sandbox.NetworkHost {
		t.Skip("harness runs with host network")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	accepted := make(chan struct{}, 1)
	go func() {
		if conn, err := ln.Accept(); err == nil {
			conn.Close()
			accepted <- struct{}{}
		}
	}()
	d := s.h.NewDriver(t)
	_, c := start(t, d, s.spec(t, newDirs(t)))

	out, _, _ := run(t, c, "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
	if ifaces := strings.Fields(out); len(ifaces) != 1 || ifaces[0] != "lo" {
		t.Errorf("interfaces = %q, want only lo", ifaces)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	out, _, code := run(t, c, fmt.Sprintf(
		`if command -v bash >/dev/null; then bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' 2>&1; else exit 1; fi`, port))
	if code == 0 {
		t.Errorf("sandbox connected to the host's 127.0.0.1:%d: %s", port, out)
	}
	select {
	case <-accepted:
		t.Error("host listener accepted a connection from the sandbox")
	case <-time.After(100 * time.Millisecond):
	}
}

// testReaping: an orphan re-parented to the guest (PID 1) is reaped, not
// left a zombie.
func (s *suite) testReaping(t *testing.T) {
	d := s.h.NewDriver(t)
	_, c := start(t, d, s.spec(t, newDirs(t)))
	// setsid puts the sleeper outside the exec's process group, so it
	// outlives the command and is orphaned to PID 1.
	if _, errb, code := run(t, c, "setsid sleep 0.2 >/dev/null 2>&1 < /dev/null &"); code != 0 {
		t.Skipf("no setsid in the image: %s", errb)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, _, _ := run(t, c, `for f in /proc/[0-9]*/stat; do cat "$f" 2>/dev/null; echo; done`)
		zombies, sleeping := 0, 0
		for _, line := range strings.Split(out, "\n") {
			i := strings.LastIndexByte(line, ')')
			if i < 0 {
				continue
			}
			if f := strings.Fields(line[i+1:]); len(f) > 0 && f[0] == "Z" {
				zombies++
			}
			if strings.Contains(line, "(sleep)") {
				sleeping++
			}
		}
		if zombies == 0 && sleeping == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("orphan not reaped (%d zombies, %d sleeping):\n%s", zombies, sleeping, out)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testLimits: a pids limit stops a small fork bomb and a memory limit stops
// a large allocation; the sandbox survives both.
func (s *suite) testLimits(t *testing.T) {
	if !s.h.Limits {
		t.Skip("driver does not enforce limits in this harness")
	}
	d := s.h.NewDriver(t)
	spec := s.spec(t, newDirs(t))
	spec.Limits = sandbox.Limits{Pids: 48, MemoryMB: 96}
	h, c := start(t, d, spec)
	st, err := d.Inspect(t.Context(), h)
	if err != nil || st.LimitsApplied == "" || st.LimitsApplied == "none" {
		t.Fatalf("LimitsApplied = %+v, %v", st, err)
	}
	t.Logf("limits applied: %s %v", st.LimitsApplied, st.Detail)

	if _, ok := st.Detail["limit.pids"]; !ok { // the driver says it enforces pids
		// Without a limit the loop ends and prints "started 200"; with one
		// the shell cannot fork and dies.
		out, errb, code := run(t, c, "i=0; while [ $i -lt 200 ]; do sleep 10 & i=$((i+1)); done; echo started $i")
		if code == 0 || strings.Contains(out, "started 200") {
			t.Errorf("200 background processes started under a pids limit of 48 (exit %d): %q %q", code, out, errb)
		}
	}
	out, _, code := run(t, c, `x=$(head -c 400000000 /dev/zero | tr '\0' a); echo ${#x}`)
	if code == 0 || strings.Contains(out, "400000000") {
		t.Errorf("400 MB allocation succeeded under a 96 MB limit (exit %d, %q)", code, out)
	}
	WaitHealthy(t, c)
	if out, _, code := run(t, c, "echo alive"); out != "alive\n" || code != 0 {
		t.Fatalf("sandbox unusable after hitting limits: %q (exit %d)", out, code)
	}
}
