package cli_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestSandboxesInheritNoFileOfTheDaemon: a descriptor the daemon inherited
// from whatever started it (here a pipe as fd 9) must not reach any
// sandbox: the only processes holding it are this test and the daemon.
func TestSandboxesInheritNoFileOfTheDaemon(t *testing.T) {
	bin := binary(t)
	home := t.TempDir()
	addr := freePort(t)
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	var stderr bytes.Buffer
	cmd := exec.Command(bin, "serve", "--listen", addr, "--home", home)
	// The sandbox run dir goes under TMPDIR and outlives the daemon: a
	// short one of the test's own (socket paths are limited to 107 bytes).
	tmp, err := os.MkdirTemp("", "aks")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(tmp) })
	cmd.Env = cleanEnv("TMPDIR=" + tmp)
	cmd.Stderr = &stderr
	// Fd 9 of the daemon, not close-on-exec (high enough that the fds the
	// driver hands bwrap do not overwrite it in the child).
	null, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	defer null.Close()
	cmd.ExtraFiles = []*os.File{null, null, null, null, null, null, w}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	waitHealthy(t, "http://"+addr, &stderr)
	env := cleanEnv("AGENTKERNEL_HOME="+home, "AGENTKERNEL_URL=http://"+addr)
	id := strings.TrimSpace(run(t, bin, env, 0, "sandbox", "create"))
	defer run(t, bin, env, 0, "sandbox", "rm", id)
	run(t, bin, env, 0, "sandbox", "exec", id, "--", "true")

	var st syscall.Stat_t
	if err := syscall.Fstat(int(w.Fd()), &st); err != nil {
		t.Fatal(err)
	}
	pipe := fmt.Sprintf("pipe:[%d]", st.Ino)
	holders := map[int]bool{}
	procs, _ := filepath.Glob("/proc/[0-9]*/fd/*")
	for _, fd := range procs {
		if link, err := os.Readlink(fd); err == nil && link == pipe {
			pid, _ := strconv.Atoi(strings.Split(fd, "/")[2])
			holders[pid] = true
		}
	}
	for pid := range holders {
		if pid != os.Getpid() && pid != cmd.Process.Pid {
			cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("pid %d (%s) holds the daemon's inherited fd", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}
