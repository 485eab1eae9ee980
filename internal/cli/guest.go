package cli

import (
	"context"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/agentkernel/agentkernel/internal/guest"
)

// runGuest is `agentkernel guest`: the sandbox's PID 1. The daemon injects
// this same binary into every sandbox.
func runGuest(ctx context.Context, m *Main, args []string) error {
	// A person who runs it by hand gets an explanation, not a server that
	// waits forever on a socket nobody connects to. Sandbox drivers never
	// give the guest a terminal (stdin is /dev/null or a pipe), so a
	// terminal on stdin without an explicit --socket, or a plea for help,
	// means a person who did not mean to start a guest.
	asked := len(args) > 0 && isHelp(args[0])
	if asked || !hasSocketFlag(args) && stdinIsTerminal(m) {
		w, code := m.Stderr, 2
		if asked {
			w, code = m.Stdout, 0
		}
		fmt.Fprint(w, `agentkernel guest is the agent inside every sandbox: the daemon starts it as
the sandbox's first process and talks to it over a socket (exec, files,
processes). It is not meant to be run by hand. To use a sandbox:

  agentkernel sandbox create
  agentkernel sandbox exec SANDBOX_ID -- COMMAND
`)
		return &ExitError{Code: code}
	}
	if code := guest.Main(ctx, args); code != 0 {
		return &ExitError{Code: code}
	}
	return nil
}

// hasSocketFlag reports whether args name the socket to serve on.
func hasSocketFlag(args []string) bool {
	for _, a := range args {
		if name, _, _ := strings.Cut(strings.TrimLeft(a, "-"), "="); strings.HasPrefix(a, "-") && name == "socket" {
			return true
		}
	}
	return false
}

// stdinIsTerminal reports whether the process's stdin is a terminal (only
// when Main runs with the real stdin).
func stdinIsTerminal(m *Main) bool {
	f, ok := m.Stdin.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), unix.TCGETS)
	return err == nil
}
