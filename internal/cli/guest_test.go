package cli_test

import (
	"bytes"
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/creack/pty"
)

// TestGuestByHand: `agentkernel guest` typed at a terminal explains what
// it is and exits 2, instead of serving on a socket nobody will connect
// to; --help explains and exits 0.
func TestGuestByHand(t *testing.T) {
	bin := binary(t)
	ptmx, tty, err := pty.Open()
	if err != nil {
		t.Fatal(err)
	}
	defer ptmx.Close()
	defer tty.Close()

	// The timeout is a safety net so a guest that serves fails the test
	// instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "guest", "--state-dir", t.TempDir(), "--workdir", t.TempDir())
	cmd.Env = cleanEnv()
	cmd.Stdin = tty
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err = cmd.Run()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("guest at a terminal: %v (want exit 2)\nstdout: %s\nstderr: %s", err, stdout.String(), stderr.String())
	}
	if !strings.Contains(stderr.String(), "not meant to be run by hand") || !strings.Contains(stderr.String(), "sandbox exec") {
		t.Fatalf("guest at a terminal does not explain itself: %q", stderr.String())
	}

	out := run(t, bin, cleanEnv(), 0, "guest", "--help")
	if !strings.Contains(out, "inside every sandbox") {
		t.Fatalf("guest --help: %q", out)
	}
}
